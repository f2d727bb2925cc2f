"""Where a command's CPU goes, by kind of process: `python -m devkit.cpu_sampler -o cpu.json -- make test`.

The suite is CPU-bound on 2 cores (load 5-9 while it runs), so what makes it slow is the CPU its
processes burn, not the wall time each test shows. Every second this reads the CPU time
(utime + stime) of every process on the machine from /proc, names each by what it is (a Spark
driver, a Kafka node, S3Proxy, an Airflow component, a pytest worker, Chromium, ...), and at the end
writes the CPU seconds per kind (the last reading of each pid, so a process that lived less than a
second is missed) and per minute, to see which phase of the run paid for what. Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
# (kind, the substrings of a command line that say it), first match wins
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kafka node", ("kafka.Kafka",)),
    ("s3proxy", ("s3proxy",)),
    ("spark standalone master/worker", ("deploy.master.Master", "deploy.worker.Worker")),
    ("spark executor (standalone)", ("CoarseGrainedExecutorBackend",)),
    ("spark driver: in-process (the session, or a benchmark's child)", ("pyspark-shell",)),
    ("spark driver: spark-submit / onceflow process", ("SparkSubmit",)),
    ("java: other", ("java",)),
    ("airflow scheduler", ("airflow scheduler",)),
    ("airflow dag-processor", ("airflow dag-processor", "dag-processor")),
    ("airflow triggerer", ("airflow triggerer",)),
    ("airflow api-server", ("airflow api-server", "api_server", "uvicorn")),
    ("airflow task", ("airflow tasks", "task-sdk", "supervisor")),
    ("pytest worker", ("pytest", "xdist", "execnet", "exec(eval(sys.stdin.readline()))")),
    ("spark python worker (UDFs, mapInArrow)", ("pyspark.daemon", "pyspark/daemon.py", "pyspark.worker")),
    ("onceflow cli (python)", ("onceflow",)),
    ("chromium", ("chrom",)),
    ("postgres", ("postgres",)),
    ("python: other", ("python",)),
)


# a `pyspark-shell` JVM is a session's: which Python process started it says whose
DRIVER_PARENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # first: an `onceflow ingest` a test starts names a pipeline file under pytest's temp folder
    ("spark driver: an `onceflow` process (ingest, audit, ...)", ("bin/onceflow ", "-m onceflow.cli")),
    ("spark driver: a pytest worker's session", ("exec(eval(sys.stdin.readline()))", "-m pytest", "bin/pytest")),
)


def kind_of(cmdline: str, parent: str = "") -> str:
    """What a process is, by its command line (and a Spark driver's by its parent's)."""
    if "pyspark-shell" in cmdline:
        for kind, marks in DRIVER_PARENTS:
            if any(mark in parent for mark in marks):
                return kind
    for kind, marks in KINDS:
        if any(mark in cmdline for mark in marks):
            return kind
    return "other"


def _cpu(fields: list[str]) -> float:
    """CPU seconds (utime + stime) from the fields of /proc/<pid>/stat after the name."""
    return (int(fields[11]) + int(fields[12])) / TICKS


def cpu_seconds(pid: int) -> float:
    """The CPU seconds one live process has burned so far (benchmarks: a driver JVM's own)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return _cpu(stat[stat.rindex(")") + 2 :].split())


def _read(pid: str) -> tuple[str, str, float, str] | None:
    """(its command line, when it started, its CPU seconds, its parent's pid): a pid and its start
    time name a process.
    A kernel thread or an exiting process has no command line: its name stands in, prefixed `[`."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    name = cmdline or "[" + stat[stat.index("(") + 1 : stat.rindex(")")]
    return name, fields[19], _cpu(fields), fields[1]


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Sampler(threading.Thread):
    """Reads every process's CPU time each `interval` seconds until stopped."""

    def __init__(self, interval: float = 1.0):
        super().__init__(daemon=True)
        self.interval = interval
        self.halt = threading.Event()
        self.began = time.monotonic()
        self.cpu: dict[tuple[str, str], tuple[str, float]] = {}  # (pid, start time) -> (kind, seconds)
        self.minutes: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._kinds: dict[str, str] = {}
        # what the processes already running had burnt is not the command's
        self._baseline = {(pid, r[1]): r[2] for pid in os.listdir("/proc") if pid.isdigit() for r in [_read(pid)] if r}

    def run(self) -> None:
        while not self.halt.wait(self.interval):
            minute = int((time.monotonic() - self.began) // 60)
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                seen = _read(pid)
                if seen is None:
                    continue
                cmdline, started, seconds, ppid = seen
                key = (pid, started)
                if cmdline.startswith("["):  # exiting (or a kernel thread): what it was before
                    kind = self.cpu[key][0] if key in self.cpu else "other"
                else:  # as it is now (after an exec)
                    kind = self._kinds.setdefault(f"{ppid} {cmdline}", kind_of(cmdline, _cmdline(ppid)))
                seconds -= self._baseline.get(key, 0.0)
                last = self.cpu.get(key, (kind, 0.0))[1]
                self.minutes[minute][kind] += max(0.0, seconds - last)
                self.cpu[key] = (kind, seconds)

    def report(self) -> dict:
        by_kind: dict[str, float] = defaultdict(float)
        processes: dict[str, int] = defaultdict(int)
        for kinds in self.minutes.values():
            for kind, seconds in kinds.items():
                by_kind[kind] += seconds
        for kind, _ in self.cpu.values():
            processes[kind] += 1
        total = sum(by_kind.values())
        return {
            "wall_s": round(time.monotonic() - self.began, 1),
            "cpu_s": round(total, 1),
            "by_kind": {
                k: {"cpu_s": round(v, 1), "share": round(v / total, 3) if total else 0, "processes": processes[k]}
                for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])
            },
            "per_minute": {m: {k: round(v, 1) for k, v in kinds.items()} for m, kinds in sorted(self.minutes.items())},
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path, required=True, help="where the JSON goes")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command: python -m devkit.cpu_sampler -o cpu.json -- make test")
    sampler = Sampler(args.interval)
    sampler.start()
    try:
        code = subprocess.call(command)
    finally:
        sampler.halt.set()
        sampler.join()
        report = sampler.report()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
        width = max(len(k) for k in report["by_kind"]) if report["by_kind"] else 0
        print(f"cpu_sampler: {report['cpu_s']} CPU-s over {report['wall_s']} s wall ({args.out})", file=sys.stderr)
        for kind, row in report["by_kind"].items():
            print(f"  {kind:<{width}}  {row['cpu_s']:>9.1f} s  {row['share']:>6.1%}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
