"""The local schema registry's Java (21+) is found where the docs say, or refused with the fix; its
launcher is the app setup unpacked."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow.errors import RegistryError
from onceflow.local import registry as reg


def _jdk(home: Path, version: str) -> Path:
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return home


@pytest.fixture
def machine(tmp_path, monkeypatch):
    jvms = tmp_path / "jvm"
    jvms.mkdir()
    monkeypatch.setattr(reg, "_JVM_DIRS", jvms)
    for var in (reg.JAVA_HOME_ENV, "JAVA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return jvms


def test_the_newest_jdk_of_21_or_more_under_the_jvm_folder_is_taken(machine):
    _jdk(machine / "java-17-openjdk-amd64", "17.0.15")
    newer = _jdk(machine / "temurin-25-jdk-amd64", "25.0.3")
    assert reg.registry_java() == newer / "bin" / "java"


def test_java_home_of_17_is_passed_over_for_one_that_fits(machine, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_jdk(machine / "java-17", "17.0.15")))
    fits = _jdk(machine / "jdk-21", "21.0.2")
    assert reg.registry_java() == fits / "bin" / "java"


def test_an_explicit_home_that_is_too_old_is_refused_with_the_fix(machine, monkeypatch):
    monkeypatch.setenv(reg.JAVA_HOME_ENV, str(_jdk(machine / "java-17", "17.0.15")))
    _jdk(machine / "jdk-25", "25")
    with pytest.raises(
        RegistryError, match=r"ONCEFLOW_REGISTRY_JAVA_HOME=.* is not a Java 21\+ home \(found version 17\)"
    ):
        reg.registry_java()


def test_no_java_of_21_says_what_it_found_and_the_fix(machine):
    _jdk(machine / "java-17", "17.0.15")
    with pytest.raises(RegistryError, match=r"needs Java 21 or newer; none found \(.*java-17: 17\).*Fix: install one"):
        reg.registry_java()


def test_the_launcher_is_the_unpacked_app_or_setup_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path))
    with pytest.raises(RegistryError, match=r"no registry jars in .*Fix: run `onceflow setup`"):
        reg.app_jar()
    app = tmp_path / "registry" / "app"
    app.mkdir(parents=True)
    (app / "quarkus-run.jar").write_text("x")
    assert reg.app_jar() == app / "quarkus-run.jar"


def test_both_ports_are_kept_and_the_url_is_the_confluent_api(tmp_path):
    first = reg.LocalRegistry(home=tmp_path)
    first.dir.mkdir(parents=True)
    (first.dir / "port.json").write_text(f'{{"port": {first.port}, "management_port": {first.management_port}}}')
    again = reg.LocalRegistry(home=tmp_path)
    assert (again.port, again.management_port) == (first.port, first.management_port)
    assert again.url == f"http://127.0.0.1:{first.port}/apis/ccompat/v7"
    assert again.env() == {"ONCEFLOW_REGISTRY_URL": again.url}


def test_schemas_are_kept_in_a_file_in_the_data_dir(tmp_path):
    """A restarted registry must still know every id it gave (else records naming one would be
    quarantined as avro_unknown_schema): Apicurio's SQL storage on an H2 file, not memory, written
    at each commit (H2's default write delay loses the last half second of registrations to a kill;
    tests/integration/test_registry_durability.py)."""
    storage = reg.LocalRegistry(home=tmp_path).storage()
    assert storage["apicurio.storage.kind"] == "sql" and storage["apicurio.storage.sql.kind"] == "h2"
    assert (
        storage["apicurio.datasource.url"]
        == f"jdbc:h2:file:{tmp_path / 'registry' / 'data' / 'registry'};WRITE_DELAY=0"
    )
