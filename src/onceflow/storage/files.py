"""The files onceflow reads and writes itself (checkpoints, identity files) on disk or in a store.

A small pathlib-like face: plain `os` calls on a local path, `pyarrow.fs` on an object store,
so the checkpoint reader, recovery and health work the same on a local directory and on
`s3://`, without a JVM. Object stores have no directories and no rename: a folder "exists"
when some key starts with it, and a move is a copy, then a delete (done only while the
pipeline's driver is stopped).
"""

from __future__ import annotations

import contextlib
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from onceflow.storage.location import Location

if TYPE_CHECKING:
    from pyarrow import fs as pafs


class StorePath:
    """A file or folder at a Location: `/`, exists, is_dir, read_bytes, names, mtime, write_bytes, move_to."""

    def __init__(self, where: str | os.PathLike | Location):
        self.location = Location.of(where)
        self.local: Path | None = self.location.local

    @cached_property
    def _remote(self) -> tuple[pafs.FileSystem, str]:
        from pyarrow import fs as pafs

        loc = self.location
        if loc.settings is not None:
            bucket, key = loc.bucket_key
            return loc.settings.arrow(), f"{bucket}/{key}".rstrip("/")
        filesystem, path = pafs.FileSystem.from_uri(loc.uri)  # gs://, abfss://, hdfs://: pyarrow's own
        return filesystem, path

    @property
    def name(self) -> str:
        return self.location.uri.rstrip("/").rsplit("/", 1)[-1]

    def __truediv__(self, part: str) -> StorePath:
        child = StorePath(self.location.child(part))
        if "_remote" in self.__dict__:  # the same file system object: S3 clients are costly to make
            fs, path = self._remote
            child.__dict__["_remote"] = (fs, f"{path}/{part}")
        return child

    def __str__(self) -> str:
        return str(self.local) if self.local is not None else self.location.uri

    def __fspath__(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"StorePath({str(self)!r})"

    def _type(self):
        from pyarrow import fs as pafs

        fs, path = self._remote
        return {pafs.FileType.File: "file", pafs.FileType.Directory: "dir"}.get(fs.get_file_info(path).type)

    def exists(self) -> bool:
        return self.local.exists() if self.local is not None else self._type() is not None

    def is_dir(self) -> bool:
        return self.local.is_dir() if self.local is not None else self._type() == "dir"

    def is_file(self) -> bool:
        return self.local.is_file() if self.local is not None else self._type() == "file"

    def mtime(self) -> float | None:
        """When the file was last written (seconds since the epoch); None when it is missing."""
        if self.local is not None:
            try:
                return self.local.stat().st_mtime
            except OSError:
                return None
        fs, path = self._remote
        info = fs.get_file_info(path)
        return info.mtime.timestamp() if info.mtime is not None else None

    def names(self) -> list[str]:
        """The names directly inside a folder; FileNotFoundError when there is none."""
        if self.local is not None:
            return os.listdir(self.local)
        from pyarrow import fs as pafs

        if self._type() != "dir":
            raise FileNotFoundError(str(self))
        fs, path = self._remote
        return [info.base_name for info in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))]

    def has_files(self) -> bool:
        """True when a file lies anywhere under this folder (empty folders, or a store's folder
        markers left by deletes, do not count)."""
        if self.local is not None:
            return self.local.is_dir() and any(f.is_file() for f in self.local.rglob("*"))
        from pyarrow import fs as pafs

        fs, path = self._remote
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        return any(info.type == pafs.FileType.File for info in infos)

    def read_bytes(self) -> bytes:
        """The file's bytes; FileNotFoundError when it is missing, OSError when it cannot be read."""
        if self.local is not None:
            return self.local.read_bytes()
        fs, path = self._remote
        if self._type() != "file":
            raise FileNotFoundError(str(self))
        with fs.open_input_stream(path) as stream:
            return stream.read()

    def read_text(self) -> str:
        return self.read_bytes().decode("utf-8")

    def write_bytes(self, data: bytes) -> None:
        """Write the whole file at once: a temp file renamed on disk, one PUT in a store (both atomic)."""
        if self.local is not None:
            self.local.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.local.with_name(f".{self.local.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, self.local)
            return
        fs, path = self._remote
        with fs.open_output_stream(path) as out:
            out.write(data)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    def delete(self) -> None:
        """Delete a file; FileNotFoundError when it is missing."""
        if self.local is not None:
            os.remove(self.local)
            return
        if self._type() != "file":
            raise FileNotFoundError(str(self))
        fs, path = self._remote
        fs.delete_file(path)

    def move_to(self, target: StorePath) -> None:
        """Move a file or folder: a rename on disk; a copy, then a delete of the source, in a store."""
        if self.local is not None and target.local is not None:
            target.local.parent.mkdir(parents=True, exist_ok=True)
            os.rename(self.local, target.local)
            return
        from pyarrow import fs as pafs

        fs, path = self._remote
        dest_fs, dest = target._remote
        kind = self._type()
        if kind == "file":
            pafs.copy_files(path, dest, source_filesystem=fs, destination_filesystem=dest_fs)
            fs.delete_file(path)
        elif kind == "dir":  # file by file: a folder left empty may show as a marker without files
            for info in fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)):
                if info.type == pafs.FileType.File:
                    to = f"{dest}/{info.path[len(path) :].lstrip('/')}"
                    pafs.copy_files(info.path, to, source_filesystem=fs, destination_filesystem=dest_fs)
            with contextlib.suppress(FileNotFoundError):
                fs.delete_dir(path)
        else:
            raise FileNotFoundError(str(self))
