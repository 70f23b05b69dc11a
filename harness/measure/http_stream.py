"""A lean HTTP/1.1 reader for streamed responses, so the client keeps up with the server.

httpx spends ~0.1 ms of CPU per stream chunk in its layers (httpcore, h11, anyio, two event-loop
turns per read); at one chunk per token that is 0.1-0.5 CPU s per 1,000 tokens, and one process
then caps near 6k tok/s (benchmarks/client_fidelity.py). `StreamClient` is an httpx.AsyncClient
(everything else the benchmark sends still goes through httpx) that also streams a POST on a plain
`asyncio.Protocol`: the chunked body is decoded and split into SSE events inside
`data_received`, and each event's payload goes to a callback at once, one event-loop turn per
read. Connections are kept alive and reused, as httpx's pool does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from harness.errors import BenchmarkError
from harness.tls import tls_context

CUT = "peer closed connection without sending complete message body"
MAX_ERROR_BODY = 65536  # a refusal's body is kept up to this many bytes (errors show 300)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop where it is installed: half the CPU per chunk of asyncio's own loop
    (benchmarks/client_fidelity.py); None (asyncio's) otherwise."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


class StreamEnded(Exception):
    """The connection closed before the response's body ended (an abort on SGLang 0.5.1)."""


class _Unanswered(Exception):
    """A reused keep-alive connection closed before any response: the request can be resent."""


class SSE:
    """Splits a byte stream into SSE `data:` payloads; `feed` is True once `[DONE]` arrived."""

    def __init__(self, on_event: Callable[[bytes], None]):
        self.on_event = on_event
        self.rest = b""
        self.done = False

    def feed(self, data: bytes) -> bool:
        if self.done:
            return True
        lines = (self.rest + data).split(b"\n") if self.rest else data.split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            if line[:5] != b"data:":
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                return True
            self.on_event(payload)
        return False


class _Response:
    """One response being read: status line and headers, then a chunked, sized or
    close-delimited body; a 200's body goes to the SSE splitter, a refusal's is kept."""

    def __init__(self, sse: SSE, future: asyncio.Future[tuple[int, bytes]]):
        self.sse = sse
        self.future = future
        self.buf = b""
        self.status = 0
        self.mode = ""  # "" until the headers are in; then "chunked", "length" or "eof"
        self.left = 0  # bytes of the sized body still to come
        self.body = b""
        self.keep_alive = True
        self.finished = False  # the whole body was read
        self.received = False  # any byte of the response arrived

    def feed(self, data: bytes) -> None:
        self.received = True
        self.buf = self.buf + data if self.buf else data
        if not self.mode and not self._head():
            return
        if self.mode == "chunked":
            self._chunks()
        elif self.mode == "length":
            take, self.buf = self.buf[: self.left], self.buf[self.left :]
            self.left -= len(take)
            self._payload(take)
            if self.left <= 0:
                self._finish()
        else:
            take, self.buf = self.buf, b""
            self._payload(take)

    def _head(self) -> bool:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return False
        lines = self.buf[:end].decode("latin-1").split("\r\n")
        self.buf = self.buf[end + 4 :]
        self.status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        self.keep_alive = headers.get("connection") != "close"
        if "chunked" in headers.get("transfer-encoding", ""):
            self.mode = "chunked"
        elif "content-length" in headers:
            self.mode, self.left = "length", int(headers["content-length"])
        else:
            self.mode, self.keep_alive = "eof", False
        if self.mode == "length" and self.left == 0:
            self._finish()
        return True

    def _chunks(self) -> None:
        while not self.finished:
            line_end = self.buf.find(b"\r\n")
            if line_end < 0:
                return
            size = int(self.buf[:line_end].split(b";", 1)[0], 16)
            if size == 0:  # the last chunk, then (trailers and) an empty line
                if self.buf.find(b"\r\n\r\n", line_end) < 0:
                    return
                self.buf = b""
                self._finish()
                return
            start = line_end + 2
            if len(self.buf) < start + size + 2:
                return
            payload = self.buf[start : start + size]
            self.buf = self.buf[start + size + 2 :]
            self._payload(payload)

    def _payload(self, data: bytes) -> None:
        if self.future.done():
            return  # [DONE] or a failure already answered the caller: drain
        if self.status != 200:
            self.body = (self.body + data)[:MAX_ERROR_BODY]
            return
        try:
            if self.sse.feed(data):
                self.future.set_result((200, b""))
        except Exception as exc:  # the callback's: a malformed chunk, say
            self.future.set_exception(exc)

    def _finish(self) -> None:
        self.finished = True
        if not self.future.done():
            self.future.set_result((self.status, self.body))

    def lost(self, exc: Exception | None) -> None:
        if self.mode == "eof" and exc is None:
            self._finish()
        elif not self.finished and not self.future.done():
            if not self.received:
                self.future.set_exception(_Unanswered())
            else:
                self.future.set_exception(StreamEnded(f"{CUT} ({exc or 'closed'})"))


class _Connection(asyncio.Protocol):
    def __init__(self, idle: list[_Connection]):
        self.idle = idle
        self.transport: asyncio.Transport | None = None
        self.response: _Response | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.response is not None:
            self.response.lost(exc)
            self.response = None

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:  # nothing asked: a confused server
            self.close()
            return
        try:
            response.feed(data)
        except (ValueError, IndexError) as exc:  # not HTTP/1.1 as SGLang's server speaks it
            if not response.future.done():
                response.future.set_exception(BenchmarkError(f"malformed HTTP response: {exc}"))
            self.response = None
            self.close()
            return
        if response.finished:
            self.response = None
            if response.keep_alive and not response.buf and not self.closed:
                self.idle.append(self)
            else:
                self.close()

    def send(self, response: _Response, data: bytes) -> None:
        assert self.transport is not None
        self.response = response
        self.transport.write(data)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class StreamClient(httpx.AsyncClient):
    """httpx's client for everything, plus `stream_events` for the benchmark's streams."""

    def __init__(self, *, base_url: str, headers: dict[str, str] | None = None, **kwargs: Any):
        kwargs.setdefault("verify", tls_context())  # not a CA bundle loaded per client
        super().__init__(base_url=base_url, headers=headers, **kwargs)
        url = urlsplit(base_url)
        self.lean = url.scheme == "http"  # https streams keep going through httpx
        self._host, self._port = url.hostname or "127.0.0.1", url.port or 80
        self._prefix = url.path.rstrip("/")
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._head = f"Host: {url.netloc}\r\nContent-Type: application/json\r\n{extra}"
        self._idle: list[_Connection] = []

    async def stream_events(
        self, path: str, body: bytes, on_event: Callable[[bytes], None]
    ) -> tuple[int, bytes]:
        """POST `body` to `path`; each SSE payload of a 200 response goes to `on_event` until
        `[DONE]`. Returns (status, body): the body only for a status other than 200. Raises
        StreamEnded when the connection is cut mid-response, OSError when none can be made."""
        head = f"POST {self._prefix}{path} HTTP/1.1\r\n{self._head}Content-Length: {len(body)}"
        data = head.encode("latin-1") + b"\r\n\r\n" + body
        loop = asyncio.get_running_loop()
        while True:
            connection, reused = await self._connection(loop)
            response = _Response(SSE(on_event), loop.create_future())
            connection.send(response, data)
            try:
                return await response.future
            except _Unanswered:
                if not reused:
                    raise StreamEnded(f"{CUT} (closed before the response)") from None
            finally:
                if not response.finished and not response.sse.done:
                    connection.close()  # cut, failed or cancelled (the deadline): drop it

    async def _connection(self, loop: asyncio.AbstractEventLoop) -> tuple[_Connection, bool]:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection, True
        async with asyncio.timeout(30.0):
            _, connection = await loop.create_connection(
                lambda: _Connection(self._idle), self._host, self._port
            )
        return connection, False

    async def aclose(self) -> None:
        for connection in self._idle:
            with contextlib.suppress(Exception):
                connection.close()
        self._idle.clear()
        await super().aclose()
