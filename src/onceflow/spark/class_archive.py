"""A class-data archive of the Spark driver JVM (the JDK's CDS), so drivers start sooner.

A driver JVM loads and verifies thousands of classes (Spark, Delta, Hadoop, Parquet)
before its first batch: seconds of every `onceflow ingest`, of every Airflow task's
spark-submit and of every restart after a kill. `onceflow setup` runs a short training
app (onceflow.spark.archive_training) once with `-XX:ArchiveClassesAtExit` (the JVM writes
the classes it loaded, parsed and verified, to a file when it exits); drivers then map that
file with `-XX:SharedArchiveFile`, so they skip that work (how much sooner:
docs/benchmarks.md, "Driver start-up", measured by benchmarks/driver_startup.py).

The archive belongs to one JVM build and one Spark installation: a stamp beside it
records both, and a driver only uses an archive whose stamp matches (the JVM checks
again itself and silently starts without it on any mismatch). ONCEFLOW_CLASS_ARCHIVE=false
turns it off. It lives with the jars (git-ignored, rebuilt by `onceflow setup`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from onceflow.paths import jars_dir

ENV = "ONCEFLOW_CLASS_ARCHIVE"
# the JVM reports an unusable archive on stdout; a driver that starts without it is not news
_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path:
    return jars_dir() / "cds" / "spark-driver.jsa"


def _stamp_path() -> Path:
    return archive_path().with_suffix(".json")


def enabled() -> bool:
    return os.environ.get(ENV, "true").lower() not in ("0", "false", "no")


def _java() -> str | None:
    """The `java` spark-submit starts: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home, "bin", "java")) if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def fingerprint() -> dict:
    """What the archive depends on: the JVM build, the Spark installation and its jar set."""
    import pyspark

    java = _java()
    jvm = next(iter(sorted(Path(java).parent.parent.glob("lib/server/libjvm.so"))), None) if java else None
    return {
        "java": java,
        "libjvm_bytes": jvm.stat().st_size if jvm else None,
        "pyspark": pyspark.__version__,
        "spark_jars_hash": jars_digest(Path(pyspark.__file__).parent / "jars"),
    }


def jars_digest(folder: Path) -> str:
    """The jars of `folder` by name, size and time: the JVM refuses an archive whose jars were
    replaced, even by files of the same name (a reinstall of the same pyspark), and then starts
    without it, silently; so such an archive must not count as usable (setup rebuilds it)."""
    jars = sorted(f"{p.name} {p.stat().st_size} {p.stat().st_mtime_ns}" for p in folder.glob("*.jar"))
    return hashlib.sha256("\n".join(jars).encode()).hexdigest()[:16]


def usable() -> bool:
    """An archive is there and was built for this JVM and this Spark installation."""
    path, stamp = archive_path(), _stamp_path()
    if not (enabled() and path.is_file() and stamp.is_file()):
        return False
    try:
        return json.loads(stamp.read_text()).get("fingerprint") == fingerprint()
    except (OSError, ValueError):
        return False


def java_options() -> str:
    """The driver's JVM options that map the archive, or "" when there is none to use."""
    return f"-XX:SharedArchiveFile={archive_path()} {_QUIET}" if usable() else ""


def build(log: Callable[[str], None] = print, force: bool = False, timeout: float = 900) -> bool:
    """Build the archive with a training app (about a minute) unless a usable one exists.
    A failure is reported and leaves drivers as they were: the archive only saves time."""
    if not enabled():
        log(f"class-data archive: off ({ENV}=false)")
        return False
    if usable() and not force:
        log(f"class-data archive: up to date ({archive_path()})")
        return True
    target = archive_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    log("class-data archive: training a Spark driver once so later drivers start sooner (about a minute) …")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="onceflow-cds-") as work:
        tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
        env = {
            **os.environ,
            ENV: "false",
            "ONCEFLOW_HOME": work,
            "ONCEFLOW_SPARK_EVENT_LOG": "false",
            "ONCEFLOW_JARS": str(jars_dir()),
        }
        output = Path(work, "train.log")
        with open(output, "wb") as out:
            try:
                code = subprocess.run(
                    [sys.executable, "-m", "onceflow.spark.archive_training", str(tmp)],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout,
                ).returncode
            except subprocess.TimeoutExpired:
                code = None
        if code != 0 or not tmp.is_file():
            tail = "\n".join(output.read_text(errors="replace").splitlines()[-15:])
            tmp.unlink(missing_ok=True)
            log(
                f"class-data archive: not built (training {'timed out' if code is None else f'exit {code}'}); "
                f"Spark drivers start without it. Its last lines:\n{tail}"
            )
            return False
    tmp.replace(target)
    _stamp_path().write_text(
        json.dumps({"fingerprint": fingerprint(), "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    )
    log(f"class-data archive: {target} ({target.stat().st_size / 2**20:.0f} MiB) in {time.monotonic() - started:.0f}s")
    return True
