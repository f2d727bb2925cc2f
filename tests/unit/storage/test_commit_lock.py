"""The commit lock serializes commits to one S3 table in a process, checks the fence, times out with
the fix, and costs nothing on a file system. And every commit in the code takes it."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import pytest

from onceflow.errors import StorageError
from onceflow.storage.commit_lock import commit_lock, held, set_fence

ROOT = Path(__file__).resolve().parents[3]


def test_on_a_file_system_it_is_free(tmp_path):
    with commit_lock(str(tmp_path)) as waited:
        assert waited == 0.0 and held(str(tmp_path))


def test_commits_to_one_s3_table_wait_for_each_other_whichever_uri_form():
    inside, order = threading.Event(), []

    def first() -> None:
        with commit_lock("s3a://b/one"):
            inside.set()
            time.sleep(0.3)
            order.append("first done")

    t = threading.Thread(target=first)
    t.start()
    inside.wait(5)
    with commit_lock("s3://b/one/") as waited:
        order.append("second in")
    t.join()
    assert order == ["first done", "second in"] and waited >= 0.2
    with commit_lock("s3://b/other") as waited:  # another table does not wait
        assert waited < 0.1


def test_it_is_reentrant_and_times_out_with_the_fix():
    with commit_lock("s3://b/t"), commit_lock("s3://b/t"):
        assert held("s3://b/t")
        errors = []

        def other() -> None:
            try:
                with commit_lock("s3://b/t", timeout=0.2):
                    pass
            except StorageError as exc:
                errors.append(str(exc))

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors and "waited 0s for the commit lock of s3://b/t" in errors[0] and "Fix:" in errors[0]


def test_the_fence_runs_inside_the_lock_before_every_commit():
    calls = []

    def fence() -> None:
        calls.append(held("s3://b/f"))
        if len(calls) > 1:
            raise StorageError("lease lost")

    set_fence(["s3a://b/f"], fence)
    try:
        with commit_lock("s3://b/f"):
            pass
        with pytest.raises(StorageError, match="lease lost"), commit_lock("s3://b/f"):
            raise AssertionError("committed without the lease")
        assert calls == [True, True] and not held("s3://b/f")  # released after the refusal
    finally:
        set_fence(["s3://b/f"], None)
    with commit_lock("s3://b/f"):
        pass


COMMITS = ("save", "execute", "executeCompaction", "write_deltalake")


def _unlocked_commits(path: Path) -> list[str]:
    """Calls that commit to a Delta table and are not inside a `with commit_lock(...)` block."""
    tree = ast.parse(path.read_text())
    parents: dict[ast.AST, ast.AST] = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in COMMITS:
            continue
        up, locked = parents.get(node), False
        while up is not None and not locked:
            if isinstance(up, ast.With):
                locked = any(
                    isinstance(i.context_expr, ast.Call) and getattr(i.context_expr.func, "id", "") == "commit_lock"
                    for i in up.items
                )
            if isinstance(up, ast.FunctionDef) and up.name.startswith("_") and up.name.endswith("_locked"):
                locked = True  # a helper only ever called under the lock (its name says so)
            up = parents.get(up)
        if not locked:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}()")
    return found


def test_every_delta_commit_in_the_code_takes_the_commit_lock():
    """Spark writes, MERGE, OPTIMIZE (onceflow.spark) and delta-rs commits (onceflow.deltars): each
    inside `with commit_lock(...)` (the class-data archive's training job writes local tables only)."""
    src = ROOT / "src" / "onceflow"
    files = [p for p in sorted((src / "spark").rglob("*.py")) if p.name != "archive_training.py"]
    files.append(src / "deltars.py")
    assert [f for p in files for f in _unlocked_commits(p)] == []
