"""Where onceflow keeps its state: one directory, overridable by ONCEFLOW_HOME.

Everything generated (broker data, jars, tables, checkpoints, reports) lives under
it, so a project checkout stays clean and a test can point it at a temp dir.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse


def state_dir() -> Path:
    """The state directory: $ONCEFLOW_HOME, else ./.onceflow (made absolute)."""
    return Path(os.environ.get("ONCEFLOW_HOME") or Path.cwd() / ".onceflow").resolve()


def reports_dir() -> Path:
    """Audit reports: $ONCEFLOW_REPORTS, else <state>/reports (with the state they describe)."""
    env = os.environ.get("ONCEFLOW_REPORTS")
    return Path(env).resolve() if env else state_dir() / "reports"


def jars_dir() -> Path:
    """JVM jars resolved by `onceflow setup`: $ONCEFLOW_JARS, else <state>/jars, else, when that
    does not exist, the checkout's .onceflow/jars (a fresh ONCEFLOW_HOME uses the jars `make setup`
    resolved there, instead of resolving them again)."""
    env = os.environ.get("ONCEFLOW_JARS")
    if env:
        return Path(env).resolve()
    own = state_dir() / "jars"
    checkout = project_root() / ".onceflow" / "jars"
    return checkout if not own.is_dir() and checkout.is_dir() else own


def project_root() -> Path:
    """The source checkout holding jvm/ and pipelines/ (for setup and defaults)."""
    env = os.environ.get("ONCEFLOW_PROJECT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "jvm").is_dir() and (parent / "pyproject.toml").is_file():
            return parent
    return Path.cwd()


def local_path(location: str | os.PathLike) -> Path | None:
    """The local path a location names: a plain path as it is; a `file:` URI (`file:/x`,
    `file:///x`, `file://localhost/x`) as its path, percent-escapes decoded as Spark decodes
    them; None for any other scheme (`s3a://`, `gs://`, ...), which only a JVM or an object
    store client can read."""
    text = os.fspath(location)
    if text.startswith("file:"):
        path = unquote(urlparse(text).path)
        return Path(path if path.startswith("/") else "/" + path)
    if "://" in text:
        return None
    return Path(text)
