"""Where a location is and what each engine is told about it, from the AWS environment alone."""

from __future__ import annotations

import pytest

from devkit import ROOT
from onceflow.config import load
from onceflow.storage.location import Location, S3Settings

LOCAL_S3 = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000/", "AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": "s3cr3t"}


@pytest.mark.parametrize("uri", ["s3://lake/t/bronze", "s3a://lake/t/bronze/", "S3A://lake/t/bronze"])
def test_every_s3_form_names_one_table_for_every_engine(uri):
    loc = Location(uri)
    assert loc.is_s3 and loc.local is None and loc.needs_commit_lock
    assert loc.spark == "s3a://lake/t/bronze" and loc.object_uri == "s3://lake/t/bronze"
    assert loc.lock_key == "s3://lake/t/bronze"


def test_local_paths_need_no_lock_and_share_a_key_whichever_way_written(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "t")
    a, b, c = Location(str(tmp_path / "t")), Location(f"file://{tmp_path}/link"), Location(str(tmp_path / "link"))
    assert not a.needs_commit_lock and a.storage_options is None and a.spark == str(tmp_path / "t")
    assert a.lock_key == b.lock_key == c.lock_key


def test_settings_come_from_the_environment_and_carry_no_secret():
    s = S3Settings.from_env(LOCAL_S3)
    assert s.endpoint == "http://127.0.0.1:9000" and s.region == "eu-west-1" and s.allow_http
    hadoop, rs = s.hadoop(), s.delta_rs()
    assert hadoop["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert hadoop["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert hadoop["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert hadoop["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert rs == {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true"}
    assert not any("s3cr3t" in v for v in [*hadoop.values(), *rs.values()])
    assert not any("secret" in k.lower() or "access.key" in k for k in [*hadoop, *rs])


def test_aws_itself_needs_only_the_region():
    s = S3Settings.from_env({"AWS_DEFAULT_REGION": "us-west-2"})
    assert s.endpoint is None and not s.allow_http
    assert "spark.hadoop.fs.s3a.endpoint" not in s.hadoop() and s.delta_rs() == {"AWS_REGION": "us-west-2"}
    assert S3Settings.from_env({}).region == "us-east-1"


def test_the_s3_specific_endpoint_wins():
    env = {"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "https://b:2"}
    s = S3Settings.from_env(env)
    assert s.endpoint == "https://b:2" and not s.allow_http


def test_relative_paths_go_under_the_data_root(tmp_path, monkeypatch):
    (tmp_path / "p.yaml").write_text((ROOT / "pipelines" / "payments.yaml").read_text())  # the shipped example
    monkeypatch.setenv("ONCEFLOW_DATA_ROOT", "s3://lake/onceflow/")
    pipeline = load(tmp_path / "p.yaml")
    assert pipeline.checkpoint_path == "s3://lake/onceflow/checkpoints/payments"
    assert pipeline.resolve("tables/payments/bronze") == "s3://lake/onceflow/tables/payments/bronze"
    assert pipeline.resolve("/abs/bronze") == "/abs/bronze"
    monkeypatch.setenv("ONCEFLOW_DATA_ROOT", str(tmp_path / "data"))
    assert pipeline.checkpoint_path == str(tmp_path / "data" / "checkpoints" / "payments")


def test_child_joins_with_one_slash():
    assert Location("s3://b/t/").child("_onceflow", "x").uri == "s3://b/t/_onceflow/x"
