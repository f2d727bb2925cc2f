"""An Airflow `aws` connection becomes the AWS environment of the process, and nothing else."""

from __future__ import annotations

import json
import os

from onceflow.airflow import aws


def test_the_connection_becomes_the_aws_environment(monkeypatch):
    extra = {"region_name": "eu-central-1", "service_config": {"s3": {"endpoint_url": "http://minio:9000"}}}
    conn = {"conn_type": "aws", "login": "AKIAEXAMPLE", "password": "wJalr/secret", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(conn))
    assert aws.connection_env("lake") == {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalr/secret",
        "AWS_REGION": "eu-central-1",
        "AWS_ENDPOINT_URL": "http://minio:9000",
    }
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(aws, "_APPLIED", set())
    assert aws.use_aws_connection() is None  # not asked for: the environment is left alone
    assert "AWS_ACCESS_KEY_ID" not in os.environ
    monkeypatch.setenv("ONCEFLOW_AWS_CONN_ID", "lake")
    try:
        assert aws.use_aws_connection() == "lake"
        assert os.environ["AWS_SECRET_ACCESS_KEY"] == "wJalr/secret" and os.environ["AWS_REGION"] == "eu-central-1"
    finally:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL"):
            os.environ.pop(key, None)
