"""One commit at a time per table in this process, on stores where the two engines could clobber.

On S3, Delta-Spark's log store checks that `_delta_log/N.json` is absent and then writes it
with a plain PUT; delta-rs writes it with put-if-absent. A delta-rs commit that lands between
Spark's check and its PUT is overwritten: the writer saw success, the log lost the commit
(reproduced in tests/integration/test_s3_commit_race.py). Within one driver, holding this
lock across every delta-rs commit and every whole Spark write, MERGE or OPTIMIZE of a table
means Spark's check always sees the commits before it; the driver lease
(onceflow.storage.lease) keeps every other process off the pipeline's tables.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from onceflow.errors import StorageError
from onceflow.storage.location import Location

_LOCKS: dict[str, threading.RLock] = {}
_FENCES: dict[str, Callable[[], None]] = {}
_GUARD = threading.Lock()


def _lock(key: str) -> threading.RLock:
    with _GUARD:
        return _LOCKS.setdefault(key, threading.RLock())


@contextlib.contextmanager
def commit_lock(where: str | Location, timeout: float = 600.0) -> Iterator[float]:
    """Hold the table's commit lock (a no-op where both engines put-if-absent); yields the seconds
    waited for it. StorageError after `timeout`: a commit that long means something is stuck."""
    location = Location.of(where)
    if not location.needs_commit_lock:
        yield 0.0
        return
    lock = _lock(location.lock_key)
    start = time.monotonic()
    if not lock.acquire(timeout=timeout):
        raise StorageError(
            f"waited {timeout:.0f}s for the commit lock of {location.lock_key}: another commit to it in this "
            "driver has not finished. Fix: look for a stuck OPTIMIZE or MERGE in the driver's log."
        )
    try:
        fence = _FENCES.get(location.lock_key)
        if fence is not None:
            fence()  # raises when this driver may no longer commit (its lease is lost or stale)
        yield time.monotonic() - start
    finally:
        lock.release()


def set_fence(tables: Iterable[str | Location], check: Callable[[], None] | None) -> None:
    """Call `check` inside the commit lock before every commit to these tables (None: stop calling
    it): the driver lease fences its holder this way (onceflow.storage.lease)."""
    with _GUARD:
        for table in tables:
            key = Location.of(table).lock_key
            if check is None:
                _FENCES.pop(key, None)
            else:
                _FENCES[key] = check


def held(where: str | Location) -> bool:
    """True when this thread holds the table's commit lock (or the table needs none)."""
    location = Location.of(where)
    if not location.needs_commit_lock:
        return True
    return _lock(location.lock_key)._is_owned()  # type: ignore[attr-defined]
