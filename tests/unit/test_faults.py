"""The driver fault switch (ONCEFLOW_FAULT): accepted forms and refused ones."""

from __future__ import annotations

import pytest

from onceflow import faults


def test_fault_specs():
    assert faults.parse(None) is None
    assert faults.parse("between_sinks@4") == ("between_sinks", 4)
    for bad in ("between_sinks", "nowhere@1", "after_sink_commit@x"):
        with pytest.raises(ValueError, match="expected <point>@<batch id>"):
            faults.parse(bad)
