"""Check, do not trust, that a store refuses a second put-if-absent of one key (HTTP 412).

delta-rs's commits, and onceflow's driver lease, are safe only where that holds; some
S3-compatible servers ignore `If-None-Match` (and write) or answer 501. Probed once per
store and process, at the start of every command that writes.
"""

from __future__ import annotations

import contextlib
import threading
import uuid

from onceflow.errors import StorageError, StoreConflict
from onceflow.storage.location import Location
from onceflow.storage.objects import ObjectStore

_PROVEN: set[str] = set()
_GUARD = threading.Lock()
FIX = (
    "Fix: use a store with conditional writes (AWS S3, GCS, Azure, MinIO, S3Proxy 4.1+, Ceph RGW 19+), "
    "or keep the pipeline's tables and checkpoint on a local or shared file system (docs/storage.md)."
)


def probe(folder: Location) -> None:
    """Write `_onceflow/probe-<uuid>` with put-if-absent twice (the second must be refused), then
    replace it with a stale ETag (must be refused); StorageError naming what failed, else nothing."""
    if not folder.is_s3:
        return
    bucket = folder.bucket_key[0]
    key_of_store = f"{folder.settings.endpoint if folder.settings else ''}|{bucket}"
    with _GUARD:
        if key_of_store in _PROVEN:
            return
    store = ObjectStore(folder)
    key = f"_onceflow/probe-{uuid.uuid4().hex}"
    try:
        try:
            first = store.create(key, b"first")
        except StorageError as exc:
            raise StorageError(f"the store at {folder.object_uri} did not take a put-if-absent: {exc} {FIX}") from None
        try:
            store.create(key, b"second")
        except StoreConflict:
            pass
        else:
            raise StorageError(
                f"the store at {folder.object_uri} accepted a second put-if-absent of {key}: it ignores "
                "If-None-Match, so two commits of one Delta version would both succeed and one would be lost. " + FIX
            )
        store.replace(key, b"third", first)  # the object changes: `first` is now a stale ETag
        try:
            store.replace(key, b"fourth", first)
        except StoreConflict:
            pass
        else:
            raise StorageError(
                f"the store at {folder.object_uri} accepted a put with a stale If-Match: the driver lease "
                "cannot fence a second driver. " + FIX
            )
    finally:
        with contextlib.suppress(StorageError):
            store.delete(key)
    with _GUARD:
        _PROVEN.add(key_of_store)
