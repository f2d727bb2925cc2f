"""Conditional writes to one object, through obstore (the object_store crate delta-rs commits with).

put-if-absent (`If-None-Match: *`) and put-if-unchanged (`If-Match: <etag>`) are what the
driver lease is made of, and what the start-up probe checks the store really does.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from onceflow.errors import StorageError, StoreConflict
from onceflow.storage.location import Location


@dataclass(frozen=True)
class Stored:
    """An object's bytes and its ETag (the version a conditional write names)."""

    data: bytes
    etag: str


class ObjectStore:
    """The objects under one S3 folder (a Location), with conditional puts."""

    def __init__(self, folder: Location):
        from obstore.store import S3Store

        if not folder.is_s3 or folder.settings is None:
            raise StorageError(f"{folder.uri} is not an S3 location; only S3 folders hold lease objects here")
        bucket, prefix = folder.bucket_key
        settings = folder.settings
        config: dict[str, Any] = {"AWS_REGION": settings.region}
        if settings.endpoint:
            config["AWS_ENDPOINT_URL"] = settings.endpoint
        # allow_http goes in client_options: obstore 0.12 panics on AWS_ALLOW_HTTP in config
        self.folder = folder
        self._store = S3Store(
            bucket,
            prefix=prefix or None,
            config=config,  # type: ignore[arg-type]  # S3Config is a TypedDict of these same keys
            client_options={"allow_http": settings.allow_http},
        )

    def _call(self, what: str, key: str, fn):
        from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError

        try:
            return fn()
        except (AlreadyExistsError, PreconditionError):
            raise StoreConflict(key) from None
        except (NotFoundError, FileNotFoundError):  # obstore raises the builtin for a missing object
            raise
        except Exception as exc:  # obstore's errors carry the request, never the secret key
            raise StorageError(
                f"{what} {self.folder.child(key).object_uri} failed: {str(exc).splitlines()[0][:300]}. "
                "Fix: check AWS_ENDPOINT_URL, the credentials in the environment and the bucket."
            ) from None

    def create(self, key: str, data: bytes) -> str:
        """Put only if absent; the new ETag, or StoreConflict."""
        import obstore

        return self._call("creating", key, lambda: obstore.put(self._store, key, data, mode="create"))["e_tag"]

    def replace(self, key: str, data: bytes, etag: str) -> str:
        """Put only if the object still has `etag`; the new ETag, or StoreConflict."""
        import obstore

        return self._call("replacing", key, lambda: obstore.put(self._store, key, data, mode={"e_tag": etag}))["e_tag"]

    def overwrite(self, key: str, data: bytes) -> str:
        """An unconditional put (the probe's control case only)."""
        import obstore

        return self._call("writing", key, lambda: obstore.put(self._store, key, data))["e_tag"]

    def get(self, key: str) -> Stored | None:
        """The object and its ETag; None when there is none."""
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            result = self._call("reading", key, lambda: obstore.get(self._store, key))
        except (NotFoundError, FileNotFoundError):
            return None
        return Stored(bytes(result.bytes()), result.meta["e_tag"] or "")

    def delete(self, key: str) -> None:
        import obstore
        from obstore.exceptions import NotFoundError

        with contextlib.suppress(NotFoundError, FileNotFoundError):
            self._call("deleting", key, lambda: obstore.delete(self._store, key))
