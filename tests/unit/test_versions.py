"""The engines' versions agree wherever they are stated: the lock, pyproject, jvm/, the docker
stack, README's table and what is installed. jvm/*/pom.xml states the JVM side, requirements.txt
the Python side; everything else must follow them, so an upgrade that forgets a place fails here."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pom(name: str, prop: str) -> str:
    text = (ROOT / "jvm" / name / "pom.xml").read_text()
    match = re.search(rf"<{re.escape(prop)}>([^<]+)</{re.escape(prop)}>", text)
    assert match, f"jvm/{name}/pom.xml has no <{prop}>"
    return match.group(1)


def _locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        name, sep, ver = line.partition("==")
        if sep:
            pins[name.strip().lower().replace("_", "-")] = ver.strip()
    return pins


def test_spark_and_delta_agree_in_the_lock_pyproject_jvm_and_the_install():
    spark, delta = _pom("spark", "spark.version"), _pom("spark", "delta.version")
    lock = _locked()
    assert lock["pyspark"] == lock["pyspark-client"] == spark, (lock["pyspark"], lock["pyspark-client"], spark)
    assert lock["delta-spark"] == delta, (lock["delta-spark"], delta)
    pyproject = (ROOT / "pyproject.toml").read_text()
    for pin in (f'"pyspark=={spark}"', f'"pyspark-client=={spark}"', f'"delta-spark=={delta}"'):
        assert pin in pyproject, f"pyproject.toml lacks {pin}"
    assert version("pyspark") == spark and version("delta-spark") == delta, "installed: pip install -r requirements.txt"
    minor = ".".join(spark.split(".")[:2])
    pom = (ROOT / "jvm" / "spark" / "pom.xml").read_text()
    assert f"<artifactId>delta-spark_{minor}_2.13</artifactId>" in pom, "Delta's jar is named for Spark's minor"


def test_s3a_matches_the_hadoop_pyspark_ships():
    """hadoop-aws must be the Hadoop release of pyspark's own hadoop-client jars (S3A calls into
    hadoop-common's internals), and the AWS SDK the one that Hadoop release was built with."""
    import pyspark

    shipped = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    assert shipped, "pyspark ships no hadoop-client-api jar"
    hadoop = shipped[0].name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    assert _pom("spark", "hadoop.version") == hadoop, f"pyspark ships Hadoop {hadoop}: set jvm/spark/pom.xml to it"
    assert (hadoop, _pom("spark", "awssdk.version")) in {("3.5.0", "2.35.4")}, (
        "the AWS SDK must be hadoop-project's aws-java-sdk-v2.version for that Hadoop (checked pairs only)"
    )


def test_the_broker_and_the_stack_run_the_same_jars():
    """The stack's broker is the onceflow image's `onceflow kafka serve`: the jars of jvm/kafka/pom.xml,
    resolved by `onceflow setup` in the build; no third-party Kafka image is named."""
    compose = (ROOT / "docker" / "compose.yaml").read_text()
    assert '["onceflow", "kafka", "serve"' in compose
    assert "onceflow setup" in (ROOT / "docker" / "Dockerfile").read_text()
    assert "KAFKA_IMAGE" not in (ROOT / "docker" / ".env.example").read_text()


def test_readme_states_the_pinned_versions():
    table = (ROOT / "README.md").read_text().split("## Versions", 1)[1].split("\n## ", 1)[0]
    lock = _locked()
    stated = [
        lock["pyspark"],
        _pom("spark", "delta.version"),
        _pom("kafka", "kafka.version"),
        lock["apache-airflow"],
        lock["apache-airflow-providers-apache-spark"],
        lock["apache-airflow-providers-apache-kafka"],
        lock["great-expectations"],
        lock["confluent-kafka"],
        lock["deltalake"],
        lock["obstore"],
        _pom("spark", "hadoop.version"),
        _pom("spark", "awssdk.version"),
        _pom("s3proxy", "s3proxy.version"),
    ]
    missing = [v for v in stated if v not in table]
    assert not missing, f"README's Versions table does not state {missing}"
