"""The operator's list of offsets moved to quarantine by hand: kept, stamped, read back, checked."""

from __future__ import annotations

import json

import pytest

from onceflow.errors import ConfigError
from onceflow.state.unprocessable import Declared, Unprocessable


def test_decisions_are_appended_stamped_and_read_back(tmp_path):
    u = Unprocessable.load(tmp_path)
    assert u.declared == [] and u.ranges("t") == {}
    first = u.add(Declared("t", {0: (10, 20)}, note="why", batch_id=3, generation=1))
    assert first.by and first.at and first.note == "why"
    u.add(Declared("t", {0: (30, 31), 2: (5, 6)}))
    u.add(Declared("other", {0: (0, 100)}))
    again = Unprocessable.load(tmp_path)
    assert again.ranges("t") == {0: [(10, 20), (30, 31)], 2: [(5, 6)]}
    assert again.covers("t", 0, 10, 20) and again.covers("t", 0, 12, 15) and not again.covers("t", 0, 10, 21)
    assert not again.covers("t", 1, 0, 1) and again.covers("other", 0, 0, 100)
    on_disk = json.loads((tmp_path / "unprocessable.json").read_text())
    assert on_disk[0]["ranges"] == {"0": [10, 20]} and on_disk[0]["batch_id"] == 3


def test_adjacent_ranges_cover_together_and_bad_ranges_or_files_are_refused(tmp_path):
    u = Unprocessable.load(tmp_path)
    u.add(Declared("t", {0: (0, 5)}))
    u.add(Declared("t", {0: (5, 9)}))
    assert u.covers("t", 0, 0, 9) and not u.covers("t", 0, 0, 10)
    with pytest.raises(ConfigError, match="not a range"):
        u.add(Declared("t", {0: (9, 9)}))
    (tmp_path / "unprocessable.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        Unprocessable.load(tmp_path)
