"""One driver per pipeline, on any machine: a lease object in the store, made with put-if-absent.

The local run lock (onceflow.state.control) only sees drivers that share ONCEFLOW_HOME. This
lease lives beside the pipeline's tables, so two Airflow workers, or a laptop and a
cluster, cannot both write them. The holder renews it every `ttl/3` with put-if-unchanged
(If-Match on the ETag it last wrote; every renewal changes the body, so the ETag changes);
a renewal refused means another driver took it, and this one stops before its next commit.
A contender that finds the lease held waits: it takes over, with If-Match, only once the
ETag has stayed the same for a whole `ttl` on its own clock (no clock sync needed), or at
once when the holder is a dead process on this same machine. The holder fences itself:
it refuses to commit when its last successful renewal began more than `ttl - margin`
ago, which is always before a contender can take over.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from onceflow.errors import LeaseHeldError, StorageError, StoreConflict
from onceflow.paths import state_dir
from onceflow.storage.location import Location
from onceflow.storage.objects import ObjectStore, Stored

LEASE_KEY = "driver-lease.json"
DEFAULT_TTL = 30.0


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _pid_dead_here(body: dict) -> bool:
    """The holder ran on this machine and that process is gone (or is another process now)."""
    import psutil

    if body.get("host") != socket.gethostname() or not isinstance(body.get("pid"), int):
        return False
    try:
        proc = psutil.Process(body["pid"])
        return abs(proc.create_time() - float(body.get("pid_start", 0))) > 1.0
    except psutil.NoSuchProcess:
        return True


@dataclass
class DriverLease:
    """The lease on `folder/driver-lease.json` for one pipeline's driver."""

    folder: Location
    pipeline: str
    ttl: float = DEFAULT_TTL
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)
    log: Callable[[str], None] = lambda msg: None
    _etag: str | None = None
    _seq: int = 0
    _renewed_at: float = 0.0  # monotonic start of the last successful write
    _lost: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @cached_property
    def store(self) -> ObjectStore:
        return ObjectStore(self.folder)

    @property
    def uri(self) -> str:
        return self.folder.child(LEASE_KEY).object_uri

    def _body(self, released: bool = False) -> bytes:
        import psutil

        self._seq += 1
        return json.dumps(
            {
                "pipeline": self.pipeline,
                "holder": self.holder,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "pid_start": psutil.Process().create_time(),
                "home": str(state_dir()),  # which ONCEFLOW_HOME: two homes on one host are two machines to the run lock
                "ttl_seconds": self.ttl,
                "seq": self._seq,
                "renewed_at": _now_iso(),
                "released": released,
            }
        ).encode()

    # -- taking it ---------------------------------------------------------
    def acquire(self, wait: float | None = None) -> None:
        """Take the lease. A holder makes this wait up to `wait` seconds (default: ttl + 5 s, enough
        to see an abandoned lease expire), then LeaseHeldError naming the live holder."""
        wait = self.ttl + 5 if wait is None else wait
        deadline = time.monotonic() + wait
        seen: tuple[str, float] | None = None  # (etag, when first seen unchanged)
        while True:
            started = time.monotonic()
            try:
                self._etag = self.store.create(LEASE_KEY, self._body())
                self._renewed_at = started
                self.log(f"driver lease taken: {self.uri}")
                return
            except StoreConflict:
                pass
            current = self.store.get(LEASE_KEY)
            if current is None:
                continue  # released and deleted between our two calls
            body = _parse(current)
            why = None
            if body.get("released"):
                why = "released by its holder"
            elif _pid_dead_here(body):
                why = f"its holder (pid {body.get('pid')} on this machine) is gone"
            elif seen and seen[0] == current.etag and time.monotonic() - seen[1] >= self.ttl:
                why = f"not renewed for {self.ttl:.0f}s"
            if why and self._take_over(current, started):
                self.log(f"driver lease taken over ({why}): {self.uri}")
                return
            if seen is None or seen[0] != current.etag:
                seen = (current.etag, time.monotonic())
            if time.monotonic() >= deadline:
                raise LeaseHeldError(
                    f"pipeline {self.pipeline}: another driver holds {self.uri} ({describe(body)}) and renewed it "
                    f"within the last {self.ttl:.0f}s. Fix: stop that driver (or wait for it to finish); a killed "
                    f"driver's lease expires {self.ttl:.0f}s after its last renewal.",
                    body,
                )
            time.sleep(min(1.0, self.ttl / 10))

    def _take_over(self, current: Stored, started: float) -> bool:
        try:
            self._etag = self.store.replace(LEASE_KEY, self._body(), current.etag)
        except StoreConflict:
            return False
        self._renewed_at = started
        return True

    # -- keeping it ---------------------------------------------------------
    def renew(self) -> None:
        """Write a new body over our own ETag; a refusal means the lease is lost for good."""
        if self._lost:
            return
        started = time.monotonic()
        try:
            assert self._etag is not None, "renew before acquire"
            self._etag = self.store.replace(LEASE_KEY, self._body(), self._etag)
            self._renewed_at = started
        except StoreConflict:
            self._lost = f"another driver took the lease {self.uri}"
        except StorageError as exc:
            self.log(f"driver lease renewal failed (retrying): {exc}")

    def start_renewing(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.ttl / 3):
                self.renew()

        self._thread = threading.Thread(target=loop, name="onceflow-lease", daemon=True)
        self._thread.start()

    def check(self, margin: float | None = None) -> None:
        """Raise unless this driver may still commit: the lease is ours and was renewed recently
        enough that no contender can have taken it (called before every commit)."""
        margin = self.ttl / 3 if margin is None else margin
        if self._lost:
            raise StorageError(f"pipeline {self.pipeline}: {self._lost}; this driver stops without committing")
        age = time.monotonic() - self._renewed_at
        if age > self.ttl - margin:
            raise StorageError(
                f"pipeline {self.pipeline}: the driver lease {self.uri} was last renewed {age:.0f}s ago "
                f"(ttl {self.ttl:.0f}s); this driver stops rather than commit without it. Fix: check the "
                "store's reachability; restart the pipeline (recovery takes the lease over)."
            )

    @property
    def lost(self) -> str | None:
        return self._lost

    def release(self) -> None:
        """Mark the lease released (If-Match, so a lease taken over meanwhile is left alone)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._etag is None or self._lost:
            return
        try:
            self.store.replace(LEASE_KEY, self._body(released=True), self._etag)
            self.log(f"driver lease released: {self.uri}")
        except (StoreConflict, StorageError):
            pass
        self._etag = None

    def __enter__(self) -> DriverLease:
        self.acquire()
        self.start_renewing()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _parse(stored: Stored) -> dict:
    try:
        body = json.loads(stored.data)
        return body if isinstance(body, dict) else {}
    except ValueError:
        return {}


def describe(body: dict) -> str:
    """Who holds a lease, for messages and the health verdict."""
    return f"pid {body.get('pid')} on {body.get('host')}, renewed {body.get('renewed_at')}"


def read_lease(folder: Location) -> dict | None:
    """The lease body as the store holds it now (None: never taken); for health and status."""
    stored = ObjectStore(folder).get(LEASE_KEY)
    return _parse(stored) if stored else None
