"""A TCP proxy between an S3 client and the S3 server that changes requests on the wire, the way a
slow network or a store without conditional writes would: for the tests that prove what onceflow
does when the store is slow (a commit's PUT held back, widening a race) or forgets a feature."""

from __future__ import annotations

import asyncio
import re
import threading


class WireProxy:
    """Forward 127.0.0.1:<port> to the S3 server; requests whose bytes match `delay_pattern` wait
    `delay` seconds first; header lines matching `drop_header` are removed (the server must not
    check signatures then: LocalS3(check_signatures=False))."""

    def __init__(
        self,
        upstream_port: int,
        delay_pattern: bytes | None = None,
        delay: float = 0.0,
        drop_header: bytes | None = None,
    ):
        self.upstream_port = upstream_port
        self.delay_pattern = re.compile(delay_pattern, re.M) if delay_pattern else None
        self.delay = delay
        self.drop = re.compile(rb"^(?:" + drop_header + rb"):[^\r\n]*\r\n", re.M | re.I) if drop_header else None
        self.delayed = 0
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True, name="wire-proxy").start()
        if not self._ready.wait(10):
            raise RuntimeError("the wire proxy did not start")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await server.serve_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, requests: bool) -> None:
            try:
                while data := await src.read(65536):
                    if requests and self.delay_pattern is not None and self.delay_pattern.search(data):
                        self.delayed += 1
                        await asyncio.sleep(self.delay)
                    if requests and self.drop is not None:
                        data = self.drop.sub(b"", data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
