"""Airflow for tests: a private AIRFLOW_HOME, the project's dags/ and plugins/, set up
before airflow is first imported (Airflow reads its config once, at import)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

if not os.environ.get("ONCEFLOW_TEST_AIRFLOW"):
    _home = tempfile.mkdtemp(prefix="onceflow-airflow-")
    atexit.register(shutil.rmtree, _home, True)
    os.environ.update(
        {
            "ONCEFLOW_TEST_AIRFLOW": "1",
            "AIRFLOW_HOME": _home,
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_home}/airflow.db",
            "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),  # trigger kwargs are stored encrypted
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}
            ),
        }
    )
    os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"

AIRFLOW_HOME = Path(os.environ["AIRFLOW_HOME"])


def migrate_db() -> None:
    """`airflow db migrate` once per AIRFLOW_HOME (dag.test() needs the metadata DB)."""
    marker = AIRFLOW_HOME / ".migrated"
    if marker.exists():
        return
    proc = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], capture_output=True, text=True, timeout=300, env=os.environ.copy()
    )
    assert proc.returncode == 0, f"airflow db migrate failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    marker.touch()
