"""A real schema registry for tests, demos and the docker stack: Apicurio Registry (Maven Central).

Started by onceflow like the broker and S3Proxy (`onceflow registry start | stop | status | env`):
one Java process on localhost, its HTTP API and its management interface both bound to 127.0.0.1
(the management one binds 0.0.0.0:9000 unless told), on ports kept in <state>/registry/port.json:
the API on 8081 (or $ONCEFLOW_REGISTRY_PORT) unless told, the management interface on a free one.
Clients use its Confluent-compatible API, `<endpoint>/apis/ccompat/v7` (what confluent-kafka's
serializers and onceflow's registry client speak). Schemas are kept in a file (H2) in its data
dir, so a restart forgets none (docs/registry.md).

Apicurio 3 needs Java 21 or newer, while onceflow's Spark and Kafka run on 17: `registry_java()`
finds one (ONCEFLOW_REGISTRY_JAVA_HOME, JAVA_HOME, the `java` on PATH, then /usr/lib/jvm/*), or
fails naming what it looked at and the fix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from onceflow.errors import RegistryError, SetupError
from onceflow.jvm import classpath_jars
from onceflow.local.service import LocalService, free_port, read_json

MIN_JAVA = 21
DEFAULT_PORT = 8081
PORT_ENV = "ONCEFLOW_REGISTRY_PORT"
JAVA_HOME_ENV = "ONCEFLOW_REGISTRY_JAVA_HOME"
CCOMPAT = "/apis/ccompat/v7"
COMPATIBILITY = "BACKWARD"
_JVM_DIRS = Path("/usr/lib/jvm")


def app_jar() -> Path:
    """The registry's launcher, unpacked by `onceflow setup` from jvm/registry/pom.xml's archive."""
    try:
        return classpath_jars("registry")[0]
    except SetupError as exc:
        raise RegistryError(str(exc)) from None


def java_major(home: Path) -> int | None:
    """The major version of the JDK or JRE at `home`, from its `release` file (None if it has none)."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return None
    match = re.search(r'^JAVA_VERSION="(\d+)', text, re.M)
    return int(match.group(1)) if match else None


def _candidates() -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for var in (JAVA_HOME_ENV, "JAVA_HOME"):
        if os.environ.get(var):
            found.append((f"${var}", Path(os.environ[var])))
    on_path = shutil.which("java")
    if on_path:
        found.append(("`java` on PATH", Path(os.path.realpath(on_path)).parent.parent))
    if _JVM_DIRS.is_dir():
        found += [(str(p), p) for p in sorted(_JVM_DIRS.iterdir(), reverse=True) if p.is_dir()]
    return found


def registry_java() -> Path:
    """A `java` of version MIN_JAVA or newer: the first of ONCEFLOW_REGISTRY_JAVA_HOME, JAVA_HOME, the
    `java` on PATH and /usr/lib/jvm/* that is one (an explicit ONCEFLOW_REGISTRY_JAVA_HOME must be)."""
    seen = []
    for where, home in _candidates():
        major = java_major(home)
        java = home / "bin" / "java"
        if major is not None and major >= MIN_JAVA and java.is_file():
            return java
        if where == f"${JAVA_HOME_ENV}":
            raise RegistryError(
                f"{JAVA_HOME_ENV}={home} is not a Java {MIN_JAVA}+ home (found version {major}). "
                f"Fix: point it at a JDK or JRE {MIN_JAVA} or newer, or unset it to search /usr/lib/jvm"
            )
        seen.append(f"{where}: {major or 'no release file'}")
    raise RegistryError(
        f"the schema registry (Apicurio 3) needs Java {MIN_JAVA} or newer; none found "
        f"({'; '.join(seen) or 'no Java'}). "
        f"Fix: install one (e.g. apt-get install openjdk-21-jre-headless) and set {JAVA_HOME_ENV} to its home"
    )


@dataclass
class RegistryStatus:
    running: bool
    ready: bool
    pid: int | None
    url: str  # the Confluent-compatible API: what a pipeline's schema.registry.url names
    management_port: int
    log_file: str


class LocalRegistry(LocalService):
    """Start, stop and inspect the Apicurio Registry living in <home>/registry."""

    FOLDER = "registry"
    STEM = "apicurio"
    TITLE = "the schema registry"
    ERROR = RegistryError
    NO_JAVA = f"no Java {MIN_JAVA}+ for the schema registry"
    NO_LOG = "(no schema registry log yet)"

    def __init__(self, home: Path | None = None, port: int | None = None):
        super().__init__(home)
        saved = read_json(self.dir / "port.json")
        # a fixed default, as the broker's, so a shipped pipeline can name it: 8081, a Confluent registry's
        self.port = port or saved.get("port") or int(os.environ.get(PORT_ENV, DEFAULT_PORT))
        self.management_port = saved.get("management_port") or free_port()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL."""
        return self.endpoint + CCOMPAT

    def env(self) -> dict[str, str]:
        """What a shell needs to reach it: the URL pipelines name as `${ONCEFLOW_REGISTRY_URL}`."""
        return {"ONCEFLOW_REGISTRY_URL": self.url}

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/subjects", timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False

    def status(self) -> RegistryStatus:
        pid = self._pid()
        return RegistryStatus(
            running=pid is not None,
            ready=bool(pid) and self._answers(),
            pid=pid,
            url=self.url,
            management_port=self.management_port,
            log_file=str(self.log_file),
        )

    def _java_cmd(self, host: str) -> list[str]:
        return [
            str(registry_java()),
            "-Xmx384m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # a test's or a demo's light load: C1 starts it on less CPU
            f"-Dquarkus.http.host={host}",
            f"-Dquarkus.http.port={self.port}",
            f"-Dquarkus.management.host={host}",
            f"-Dquarkus.management.port={self.management_port}",
            # schemas in a file (H2), not in memory: a restarted registry still knows every id it gave,
            # so no record is judged `avro_unknown_schema` because the registry restarted
            *(f"-D{k}={v}" for k, v in self.storage().items()),
            "-jar",
            str(app_jar()),
        ]

    def storage(self) -> dict[str, str]:
        """Apicurio's storage settings: SQL on an H2 file in the data dir (the stack's image sets the
        same, as environment variables, on its volume), written at each commit: H2's default 500 ms
        write delay loses registrations a kill follows, and a lost id may be given again."""
        return {
            "apicurio.storage.kind": "sql",
            "apicurio.storage.sql.kind": "h2",
            "apicurio.datasource.url": f"jdbc:h2:file:{self.data_dir / 'registry'};WRITE_DELAY=0",
        }

    def start(self, timeout: float = 90, log=lambda msg: None) -> RegistryStatus:
        """Start the registry (idempotent) and wait until its API answers."""
        if self._pid():
            log(f"schema registry already running (pid {self._pid()}) at {self.url}")
        else:
            cmd = self._java_cmd("127.0.0.1")  # finds Java and the app first: their errors say the fix
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / "port.json").write_text(
                json.dumps({"port": self.port, "management_port": self.management_port})
            )
            proc = self._launch(cmd, cwd=self.dir)
            log(f"schema registry starting (pid {proc.pid}) at {self.url}; log: {self.log_file}")
        self._wait_answering(
            self._answers,
            timeout,
            lambda: RegistryError(f"the schema registry did not answer at {self.url} within {timeout:.0f}s"),
            interval=0.25,
            log_lines=30,
        )
        self._check_compatibility()
        return self.status()

    def _check_compatibility(self) -> None:
        """BACKWARD compatibility for every subject, as Confluent's registry defaults to (Apicurio's
        default is no rule at all): a schema a reader of the subject could not read is refused."""
        request = urllib.request.Request(
            self.url + "/config",
            data=json.dumps({"compatibility": COMPATIBILITY}).encode(),
            method="PUT",
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            reply.read()

    def serve(self, bind: str) -> None:
        """Become the registry, in the foreground (a container's main process, `onceflow registry serve`)."""
        cmd = self._java_cmd(bind)  # its compatibility is set by whoever starts the stack (docs/registry.md)
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chdir(self.dir)
        os.execv(cmd[0], cmd)

    def stop(self, timeout: float = 20) -> bool:
        return self._stop_process(timeout)
