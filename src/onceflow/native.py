"""onceflow's native library (native/judge: Rust without dependencies, built offline by `onceflow
setup` with cargo, loaded with ctypes): the audit's compiled judge (audit/native_judge.py) and its
columnar Kafka reader (kafka/native_read.py), each called with the GIL let go.

Where it is not built (no Rust toolchain; an installed package without its checkout) both fall back
to their Python paths, and say so: the audit's report names its judge's engine.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from onceflow.paths import project_root

LIBRARY_ENV = "ONCEFLOW_NATIVE"  # the built library's path, instead of the checkout's; `off`: none
_CRATE = Path("native") / "judge"
_LIBRARY = "libonceflow_judge.so"


def library_path() -> Path:
    """Where the built library is: $ONCEFLOW_NATIVE, else the checkout's .onceflow/native."""
    env = os.environ.get(LIBRARY_ENV, "").strip()
    return Path(env) if env else project_root() / ".onceflow" / "native" / "release" / _LIBRARY


def build(log: Callable[[str], None] = print) -> Path | None:
    """Build the library with cargo (offline: the crate has no dependencies); None, said, when there
    is no crate (an installed package) or no cargo (then the Python paths serve)."""
    crate = project_root() / _CRATE
    if not (crate / "Cargo.toml").is_file():
        return None
    cargo = shutil.which("cargo") or shutil.which(str(Path.home() / ".cargo" / "bin" / "cargo"))
    if cargo is None:
        log(
            "native library: no cargo, so audits judge with DuckDB and read Kafka in Python (several times "
            "the CPU). Fix: install Rust (rustup, or `apt-get install cargo`) and run `onceflow setup` again"
        )
        return None
    target = project_root() / ".onceflow" / "native"
    log(f"native library: building {crate} with cargo …")
    built = subprocess.run(
        [cargo, "build", "--release", "--offline", "--quiet", "--manifest-path", str(crate / "Cargo.toml")],
        env={**os.environ, "CARGO_TARGET_DIR": str(target)},
        capture_output=True,
        text=True,
    )
    library.cache_clear()
    if built.returncode != 0:
        log(
            f"native library: cargo failed (exit {built.returncode}), so audits judge with DuckDB and read Kafka "
            f"in Python:\n{built.stderr.strip()[-2000:]}\nFix: a Rust toolchain of 1.63 or later "
            "(rustup, or `apt-get install cargo`), then `onceflow setup` again"
        )
        return None
    log(f"native library: {target / 'release' / _LIBRARY}")
    return target / "release" / _LIBRARY


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL | None:
    """The loaded library, or None where it is not built (or $ONCEFLOW_NATIVE is `off`)."""
    if os.environ.get(LIBRARY_ENV, "").strip().lower() == "off":
        return None
    path = library_path()
    return ctypes.CDLL(str(path)) if path.is_file() else None
