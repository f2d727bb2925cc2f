"""StorePath on a local folder behaves as the os calls it replaces (the store side is
tests/integration/test_storage.py, against a real S3 server)."""

from __future__ import annotations

import pytest

from onceflow.storage.files import StorePath


def test_files_and_folders(tmp_path):
    root = StorePath(tmp_path / "ck")
    assert not root.exists() and root.mtime() is None
    (root / "offsets" / "0").write_text("v1\n")
    assert root.is_dir() and (root / "offsets" / "0").is_file() and not (root / "offsets").is_file()
    assert root.names() == ["offsets"] and (root / "offsets").names() == ["0"]
    assert (root / "offsets" / "0").read_text() == "v1\n" and (root / "offsets" / "0").mtime()
    assert not list((tmp_path / "ck" / "offsets").glob(".*.tmp"))  # written whole, through a renamed temp file
    assert str(root / "offsets") == str(tmp_path / "ck" / "offsets") and (root / "offsets").name == "offsets"
    with pytest.raises(FileNotFoundError):
        (root / "nothing").names()
    with pytest.raises(FileNotFoundError):
        (root / "nothing").read_bytes()


def test_file_uris_are_local_paths(tmp_path):
    (tmp_path / "x").write_text("1")
    path = StorePath(f"file://{tmp_path}/x")
    assert path.local == tmp_path / "x" and path.read_text() == "1" and str(path) == str(tmp_path / "x")


def test_move_and_delete(tmp_path):
    src = StorePath(tmp_path / "a")
    (src / "f").write_text("x")
    dest = StorePath(tmp_path / "moved" / "a")
    src.move_to(dest)
    assert not src.exists() and (dest / "f").read_text() == "x"
    (dest / "f").delete()
    assert not (dest / "f").exists()
    with pytest.raises(FileNotFoundError):
        (dest / "f").delete()
