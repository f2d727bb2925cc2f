"""A real S3 API server for tests and demos: S3Proxy (Maven Central), filesystem backend.

Started by onceflow like the Kafka broker (`onceflow s3 start | stop | status | env`): one
Java process, a free port, objects under <state>/s3/data, a bucket `onceflow`, SigV4 with
credentials generated at first start and kept in <state>/s3/credentials.json (mode 0600).
S3Proxy honours `If-None-Match: *` and `If-Match` (412 when they do not hold), which is
what delta-rs's commits and onceflow's driver lease need (docs/storage.md).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from onceflow.errors import StorageError
from onceflow.local.service import LocalService, free_port, read_json

BUCKET = "onceflow"
MAIN = "org.gaul.s3proxy.Main"


@dataclass
class S3ServerStatus:
    running: bool
    ready: bool
    pid: int | None
    endpoint: str
    bucket: str
    data_dir: str
    log_file: str


class LocalS3(LocalService):
    """Start, stop and inspect the S3Proxy living in <home>/s3."""

    FOLDER = "s3"
    STEM = "s3proxy"
    TITLE = "S3Proxy"
    ERROR = StorageError
    NO_JAVA = "`java` is not on PATH; S3Proxy needs Java 17+. Fix: install a JDK."
    NO_LOG = "(no S3Proxy log yet)"

    def __init__(self, home: Path | None = None, port: int | None = None, check_signatures: bool = True):
        super().__init__(home)
        self.check_signatures = check_signatures  # False: any request is let in (tests that rewrite requests)
        saved = self._saved()
        self.port = port or saved.get("port") or free_port()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _saved(self) -> dict:
        return read_json(self.dir / "port.json")

    def _credentials(self) -> dict[str, str]:
        path = self.dir / "credentials.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            creds = {"access_key": "onceflow", "secret_key": secrets.token_urlsafe(24)}
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(creds, out)
            return creds

    def env(self) -> dict[str, str]:
        """The environment a client needs to reach this server (standard AWS names)."""
        creds = self._credentials()
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",  # delta-rs's and obstore's own name: plain HTTP to this local server
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": creds["access_key"],
            "AWS_SECRET_ACCESS_KEY": creds["secret_key"],
        }

    def url(self, *parts: str) -> str:
        """`s3://onceflow/<parts>`: a location in the server's bucket."""
        return "/".join([f"s3://{BUCKET}", *parts])

    def _properties(self, endpoint: str | None = None, creds: dict[str, str] | None = None) -> str:
        creds = creds or self._credentials()
        props = {
            "s3proxy.endpoint": endpoint or self.endpoint,
            "s3proxy.authorization": "aws-v2-or-v4" if self.check_signatures else "none",
            "s3proxy.identity": creds["access_key"],
            "s3proxy.credential": creds["secret_key"],
            "jclouds.provider": "filesystem-nio2",
            "jclouds.identity": "local",  # S3Proxy refuses to start without them; the backend ignores them
            "jclouds.credential": "local",
            "jclouds.filesystem.basedir": str(self.data_dir),
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def status(self) -> S3ServerStatus:
        pid = self._pid()
        return S3ServerStatus(
            running=pid is not None,
            ready=bool(pid) and self._answers(),
            pid=pid,
            endpoint=self.endpoint,
            bucket=BUCKET,
            data_dir=str(self.data_dir),
            log_file=str(self.log_file),
        )

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
                return conn.recv(12).startswith(b"HTTP/")
        except OSError:
            return False

    def start(self, timeout: float = 60, log=lambda msg: None) -> S3ServerStatus:
        """Start the server (idempotent) and wait until it answers HTTP."""
        if self._pid():
            log(f"S3 server already running (pid {self._pid()}) at {self.endpoint}")
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.data_dir / BUCKET).mkdir(parents=True, exist_ok=True)  # a folder of the backend is a bucket
            conf = self.dir / "s3proxy.conf"
            fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(self._properties())
            (self.dir / "port.json").write_text(json.dumps({"port": self.port}))
            proc = self._launch(self._java_cmd(conf))
            log(f"S3 server starting (pid {proc.pid}) at {self.endpoint}; log: {self.log_file}")

        self._wait_answering(
            self._answers,
            timeout,
            lambda: StorageError(f"S3Proxy did not answer at {self.endpoint} within {timeout:.0f}s"),
            interval=0.2,
            log_lines=20,
        )
        return self.status()

    def _java_cmd(self, conf: Path) -> list[str]:
        java, jars = self._java("s3proxy")
        classpath = os.pathsep.join(str(j) for j in jars)
        return [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            classpath,
            MAIN,
            "--properties",
            str(conf),
        ]

    def serve(self, bind: str, bucket: str, access_key: str, secret_key: str) -> None:
        """Become S3Proxy, in the foreground (a container's main process, `onceflow s3 serve`): the
        settings of `start`, bound at `bind`:port, serving `bucket` (created) to these keys only.
        The keys reach it in a 0600 properties file, never on its command line."""
        if not (access_key and secret_key):
            raise StorageError(
                "no keys to serve: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are empty. "
                "Fix: set both (the docker stack's docker/.env has them)"
            )
        (self.data_dir / bucket).mkdir(parents=True, exist_ok=True)  # a folder of the backend is a bucket
        conf = self.dir / "s3proxy.conf"
        creds = {"access_key": access_key, "secret_key": secret_key}
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(self._properties(endpoint=f"http://{bind}:{self.port}", creds=creds))
        cmd = self._java_cmd(conf)
        os.execv(cmd[0], cmd)

    def stop(self, timeout: float = 20) -> bool:
        return self._stop_process(timeout)
