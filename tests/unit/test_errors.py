"""Exceptions carry their fields: a caller reads `path`, `reason` or `cause`, never splits the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow import errors
from onceflow.checkpoint import read_checkpoint, read_offsets_file
from onceflow.state.generation import read_identity


def test_every_exception_derives_from_the_base_and_says_what_it_is():
    for name in dir(errors):
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == errors.__name__:
            assert cls.__doc__ and cls.__doc__.strip(), name
            # the two control-flow signals (a held batch, a refused conditional write) are not errors
            assert issubclass(cls, errors.OnceflowError) or name in ("BatchHeld", "StoreConflict"), name


def test_a_checkpoint_file_error_names_the_file_and_the_reason(tmp_path):
    path = tmp_path / "offsets" / "3"
    path.parent.mkdir()
    path.write_text("v1\n{not json\n")
    with pytest.raises(errors.CheckpointFileError) as caught:
        read_offsets_file(path)
    exc = caught.value
    assert exc.path == str(path) and exc.reason.startswith("line 2 (batch metadata) is not valid JSON")
    assert str(exc) == f"{path}: {exc.reason}" and isinstance(exc, errors.CheckpointError)


def test_the_checkpoint_reader_reports_the_reason_without_the_path_even_when_the_path_has_a_colon(tmp_path):
    root = tmp_path / "a: b"
    (root / "offsets").mkdir(parents=True)
    (root / "metadata").write_text('{"id": "q"}')
    (root / "offsets" / "0").write_text("")
    ck = read_checkpoint(root)
    assert [p.reason for p in ck.problems if p.path.endswith("offsets/0")] == [
        "offsets file is empty (a crash mid-write, or not written by Spark)"
    ]


def test_an_unreadable_identity_file_carries_its_path_and_cause(tmp_path: Path):
    (tmp_path / "_onceflow.json").write_text("{broken")
    with pytest.raises(errors.IdentityFileError) as caught:
        read_identity(str(tmp_path))
    exc = caught.value
    assert exc.path == str(tmp_path / "_onceflow.json") and "Expecting property name" in exc.cause
    assert exc.problem == f"{exc.path} is unreadable ({exc.cause})"
    assert str(exc) == exc.problem + ". Fix: run `onceflow recover` to start a new generation from the sink ledgers."
    assert isinstance(exc, errors.RecoveryError)
