"""The object-store parts against a real S3 API server (S3Proxy), no Spark: the start-up probe, the
driver lease, the checkpoint reader and recovery's file moves on `s3://`, delta-rs commits under the
commit lock. The race between Spark's and delta-rs's commits is tests/integration/test_s3_commit_race.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyarrow import fs as pafs

from onceflow.checkpoint import batch_offset_range, read_checkpoint
from onceflow.errors import LeaseHeldError, StorageError
from onceflow.ledger import LedgerEntry, read_ledger
from onceflow.local.s3 import LocalS3
from onceflow.state.generation import new_identity, read_identity, write_identity
from onceflow.storage import probe as probe_module
from onceflow.storage.commit_lock import commit_lock, set_fence
from onceflow.storage.files import StorePath
from onceflow.storage.lease import LEASE_KEY, DriverLease, read_lease
from onceflow.storage.location import Location
from onceflow.storage.objects import ObjectStore
from tests.s3_wire import WireProxy
from tests.unit.test_checkpoint import TOPIC, write_checkpoint

pytestmark = [pytest.mark.integration]


@pytest.fixture
def folder(s3) -> Location:
    """A fresh folder in the session's bucket."""
    return Location(s3.url("storage", uuid.uuid4().hex[:10]))


def test_the_probe_passes_on_a_store_with_conditional_writes(folder):
    probe_module.probe(folder)  # S3Proxy 4.1: 412 on a second put-if-absent and on a stale If-Match


def test_a_store_that_ignores_conditional_writes_is_refused_with_the_fix(s3, tmp_path, monkeypatch):
    """The same server with If-None-Match and If-Match taken off every request on the wire, as a store
    without conditional writes behaves: the probe says what failed and what to use instead."""
    lax = LocalS3(home=tmp_path, check_signatures=False)
    lax.start()
    try:
        proxy = WireProxy(lax.port, drop_header=rb"If-None-Match|If-Match")
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        with pytest.raises(StorageError) as refused:
            probe_module.probe(Location("s3://onceflow/lax/table"))
        message = str(refused.value)
        assert "accepted a second put-if-absent" in message and "Fix: use a store with conditional writes" in message
        assert os.environ["AWS_SECRET_ACCESS_KEY"] not in message
    finally:
        lax.stop()


def test_a_second_driver_is_refused_naming_the_holder_and_a_lapsed_lease_is_taken_over(folder):
    first = DriverLease(folder, "p", ttl=3)
    first.acquire()
    first.start_renewing()
    second = DriverLease(folder, "p", ttl=3)
    started = time.monotonic()
    with pytest.raises(LeaseHeldError) as held:
        second.acquire(wait=4)  # longer than the ttl: the holder renews meanwhile, so it is live
    assert time.monotonic() - started < 8
    assert held.value.holder["holder"] == first.holder and f"pid {os.getpid()}" in str(held.value)
    assert (read_lease(folder) or {})["holder"] == first.holder

    first._stop.set()  # the holder hangs: no more renewals (a driver on another machine, frozen)
    assert first._thread is not None
    first._thread.join()
    started = time.monotonic()
    second.acquire(wait=10)
    waited = time.monotonic() - started
    assert 2.5 <= waited <= 6, waited  # one ttl after it last saw the lease change
    assert (read_lease(folder) or {})["holder"] == second.holder

    first.renew()  # the old holder wakes up: its lease is gone, and it may not commit
    assert first.lost
    with pytest.raises(StorageError, match="another driver took the lease"):
        first.check()
    second.release()
    assert (read_lease(folder) or {})["released"] is True
    third = DriverLease(folder, "p", ttl=3)
    third.acquire(wait=0)  # a released lease is taken at once
    third.release()


def test_a_killed_drivers_lease_on_this_machine_is_taken_over_at_once(folder, tmp_path):
    """kill -9 of the holder: the next driver on the same machine sees the process gone and does not
    wait out the ttl (on another machine it would wait one ttl)."""
    code = (
        "import time\nfrom onceflow.storage.lease import DriverLease\nfrom onceflow.storage.location import Location\n"
        f"lease = DriverLease(Location({folder.uri!r}), 'p', ttl=60); lease.acquire(); lease.start_renewing()\n"
        "print('held', flush=True); time.sleep(600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        started = time.monotonic()
        lease = DriverLease(folder, "p", ttl=60)
        lease.acquire(wait=10)
        assert time.monotonic() - started < 5
        lease.release()
    finally:
        holder.kill()


def test_a_lost_lease_fences_every_commit_through_the_commit_lock(folder):
    table = folder.child("t")
    lease = DriverLease(folder, "p", ttl=3)
    lease.acquire()
    set_fence([table.uri], lease.check)
    try:
        with commit_lock(table):
            pass  # fresh: commits go through
        ObjectStore(folder).overwrite(LEASE_KEY, b'{"holder": "someone else"}')  # taken over behind our back
        lease.renew()
        with pytest.raises(StorageError, match="another driver took the lease"), commit_lock(table):
            raise AssertionError("the commit ran without the lease")
    finally:
        set_fence([table.uri], None)


def test_the_checkpoint_reader_reads_the_same_checkpoint_from_the_store(folder, tmp_path):
    """A checkpoint copied to the store reads as it does on disk (pyarrow's S3 client, no JVM)."""
    local = write_checkpoint(
        tmp_path / "ck", {0: 0, 1: 5}, {0: {0: 10, 1: 15}, 1: {0: 20, 1: 25}, 2: {0: 30, 1: 35}}, [0, 1]
    )
    (local / "offsets" / ".3.tmp").write_text("partial")
    remote = folder.child("ck")
    s3fs = pafs.S3FileSystem(
        endpoint_override=os.environ["AWS_ENDPOINT_URL"].split("://")[1], scheme="http", region="us-east-1"
    )
    bucket, key = remote.bucket_key
    pafs.copy_files(
        str(local), f"{bucket}/{key}", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=s3fs
    )

    on_disk, in_store = read_checkpoint(local).as_dict(), read_checkpoint(remote.uri).as_dict()
    for view in (on_disk, in_store):
        view.pop("path")
        view["problems"] = [p["reason"] for p in view["problems"]]
    assert in_store == on_disk and in_store["uncommitted"] == 2 and in_store["problems"]
    assert (
        batch_offset_range(remote.uri, 1, TOPIC)
        == batch_offset_range(local, 1, TOPIC)
        == ({0: 10, 1: 15}, {0: 20, 1: 25})
    )
    assert read_checkpoint(Location(remote.uri.replace("s3://", "s3a://")).uri).last_committed == 1


def test_identity_files_and_moves_work_in_the_store(folder):
    checkpoint = folder.child("checkpoint")
    write_identity(checkpoint.uri, new_identity("p", 3, '{"t": {"0": 5}}', "test"))
    identity = read_identity(checkpoint.uri)
    assert identity is not None and identity.generation == 3
    (StorePath(checkpoint) / "offsets" / "0").write_text("v1\n{}\n-\n")
    target = StorePath(folder.child("moved"))
    StorePath(checkpoint).move_to(target)
    assert not StorePath(checkpoint).exists()
    assert (target / "offsets" / "0").read_text() == "v1\n{}\n-\n"
    assert json.loads((target / "_onceflow.json").read_bytes())["generation"] == 3


def test_delta_rs_commits_and_the_ledger_read_back_from_the_store(folder):
    from onceflow.deltars import Appender

    table = folder.child("bronze")
    write_deltalake(table.object_uri, pa.table({"x": pa.array([], pa.int64())}), storage_options=table.storage_options)
    appender = Appender(table.uri.replace("s3://", "s3a://"))
    entry = LedgerEntry(pipeline="p", sink="bronze", generation=0, batch_id=0, topic="t", start={0: 0}, end={0: 2})
    assert appender.append({"x": [1, 2]}, entry.to_json(), entry.app_id, 0) == 1
    assert appender.append({"x": [1, 2]}, entry.to_json(), entry.app_id, 0) is None  # a replay is skipped
    assert DeltaTable(table.object_uri).to_pyarrow_table().num_rows == 2
    assert [e.batch_id for e in read_ledger(table.uri).entries] == [0]
