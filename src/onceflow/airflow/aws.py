"""An Airflow `aws` connection as the AWS environment every engine reads (docs/storage.md).

Set ONCEFLOW_AWS_CONN_ID (e.g. `aws_default`) where Airflow runs, and the tasks, triggers and
the page of every pipeline reach its object store with that connection: login = access key id,
password = secret access key, extra `region_name`, `endpoint_url` (or
`service_config.s3.endpoint_url`), `aws_session_token`. The values go into this process's
environment only: never into an operator's templated fields (Airflow stores rendered
templates), Spark settings or spark-submit's command line; a local spark-submit inherits them.
On YARN or Kubernetes the driver runs elsewhere: give it credentials there (an instance role).
"""

from __future__ import annotations

import os
import threading

from airflow.sdk import BaseHook

_APPLIED: set[str] = set()
_GUARD = threading.Lock()


def connection_env(conn_id: str) -> dict[str, str]:
    """The AWS_* variables an `aws` connection stands for."""
    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson or {}
    s3 = (extra.get("service_config") or {}).get("s3") or {}
    env = {
        "AWS_ACCESS_KEY_ID": conn.login,
        "AWS_SECRET_ACCESS_KEY": conn.password,
        "AWS_SESSION_TOKEN": extra.get("aws_session_token"),
        "AWS_REGION": extra.get("region_name"),
        "AWS_ENDPOINT_URL": s3.get("endpoint_url") or extra.get("endpoint_url"),
    }
    return {k: str(v) for k, v in env.items() if v}


def use_aws_connection() -> str | None:
    """Apply ONCEFLOW_AWS_CONN_ID's connection to this process's environment, once; its id or None."""
    conn_id = os.environ.get("ONCEFLOW_AWS_CONN_ID")
    if not conn_id:
        return None
    with _GUARD:
        if conn_id not in _APPLIED:
            os.environ.update(connection_env(conn_id))
            _APPLIED.add(conn_id)
    return conn_id
