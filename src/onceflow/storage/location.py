"""A location (table, checkpoint, lease) and the S3 settings every engine takes from the environment.

Credentials are never read here: Spark's S3A, delta-rs, pyarrow and obstore each take
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN (or an instance role) from
the process environment themselves, so no secret is ever put in a Spark setting (which
spark-submit's command line, the Spark UI and the event log would show), a status file or
a log line. What onceflow passes on is only where the store is and how to talk to it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from onceflow.paths import local_path

if TYPE_CHECKING:
    from pyarrow import fs as pafs

S3_SCHEMES = ("s3a", "s3", "s3n")
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class S3Settings:
    """Where an S3-compatible store is: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (empty: AWS itself),
    AWS_REGION / AWS_DEFAULT_REGION. An `http://` endpoint (a local S3Proxy or MinIO) is allowed
    plain HTTP and path-style addressing, which such servers need."""

    endpoint: str | None
    region: str

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> S3Settings:
        env = dict(os.environ) if env is None else env
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        return cls(endpoint=endpoint.rstrip("/") if endpoint else None, region=region)

    @property
    def allow_http(self) -> bool:
        return bool(self.endpoint and self.endpoint.startswith("http://"))

    def hadoop(self) -> dict[str, str]:
        """Spark settings for S3A (no credentials: S3A's default chain reads the environment)."""
        conf = {
            # one URI form for every engine: `s3://` paths in Spark go to S3A as well
            "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.s3a.endpoint.region": self.region,
        }
        if self.endpoint:
            conf |= {
                "spark.hadoop.fs.s3a.endpoint": self.endpoint,
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": str(not self.allow_http).lower(),
            }
        return conf

    def delta_rs(self) -> dict[str, str]:
        """delta-rs storage options (object_store keys); credentials come from the environment."""
        opts = {"AWS_REGION": self.region}
        if self.endpoint:
            opts["AWS_ENDPOINT_URL"] = self.endpoint
        if self.allow_http:
            opts["AWS_ALLOW_HTTP"] = "true"
        return opts

    def arrow(self) -> pafs.S3FileSystem:
        from pyarrow import fs as pafs

        if not self.endpoint:
            return pafs.S3FileSystem(region=self.region)
        scheme, _, host = self.endpoint.partition("://")
        return pafs.S3FileSystem(
            region=self.region, endpoint_override=host, scheme=scheme, force_virtual_addressing=False
        )


@dataclass(frozen=True)
class Location:
    """One table, checkpoint or folder: a local path or an object-store URI, as the pipeline
    file wrote it (relative paths already resolved)."""

    uri: str

    @classmethod
    def of(cls, where: str | os.PathLike | Location) -> Location:
        return where if isinstance(where, Location) else cls(os.fspath(where))

    @property
    def scheme(self) -> str:
        return self.uri.split("://", 1)[0].lower() if "://" in self.uri else "file"

    @property
    def is_s3(self) -> bool:
        return self.scheme in S3_SCHEMES

    @property
    def local(self) -> Path | None:
        """The local path, or None for an object store."""
        return local_path(self.uri)

    @property
    def bucket_key(self) -> tuple[str, str]:
        """(bucket, key) of an S3 location."""
        rest = self.uri.split("://", 1)[1]
        bucket, _, key = rest.partition("/")
        return bucket, key.strip("/")

    def _with_scheme(self, scheme: str) -> str:
        """An S3 location in `scheme` (normalized bucket/key); any other location as written."""
        if not self.is_s3:
            return self.uri
        bucket, key = self.bucket_key
        return f"{scheme}://{bucket}/{key}"

    @property
    def spark(self) -> str:
        """What Spark reads and writes: `s3a://` for S3 (Hadoop's S3 connector), else as written."""
        return self._with_scheme("s3a")

    @property
    def object_uri(self) -> str:
        """What delta-rs, pyarrow and obstore take: `s3://bucket/key`, else as written."""
        return self._with_scheme("s3")

    @cached_property
    def settings(self) -> S3Settings | None:
        return S3Settings.from_env() if self.is_s3 else None

    @property
    def storage_options(self) -> dict[str, str] | None:
        """delta-rs's storage options for this location (None on local disk)."""
        return self.settings.delta_rs() if self.settings else None

    @property
    def lock_key(self) -> str:
        """One name per table whichever way it is written (s3a/s3, relative/absolute, symlinks)."""
        if self.is_s3:
            return self.object_uri.rstrip("/")
        local = self.local
        return os.path.realpath(local) if local is not None else self.uri.rstrip("/")

    @property
    def needs_commit_lock(self) -> bool:
        """True where Spark's and delta-rs's commits do not both put-if-absent: S3, whose Delta-Spark
        log store checks for the commit file and then writes it unconditionally (docs/exactly-once.md)."""
        return self.is_s3

    def child(self, *parts: str) -> Location:
        return Location("/".join([self.uri.rstrip("/"), *parts]))

    def __str__(self) -> str:
        return self.uri
