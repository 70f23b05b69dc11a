"""The floor under any client's CPU per streamed token: the price of waking up for each chunk.

A paced server (a subprocess) streams chunked SSE events, one small JSON event every
`--interval` seconds (11 ms: one token per decode step of a real server at concurrency 1), and
three bare readers take the stream with no HTTP parsing and no JSON, side by side in one run:
a blocking socket `recv`, an `asyncio.Protocol` on asyncio's own event loop, and the same on
uvloop (the loop the benchmark client uses, harness/measure/http_stream.py). Their CPU seconds per
1,000 chunks are what one wake-up costs on this machine, before any client work; specsweep's
client (benchmarks/client_fidelity.py) can only sit above it. Printed as a table and written as
JSON.

    python benchmarks/client_wakeup_floor.py [--chunks 500] [--interval 0.011] [--json PATH]
    python benchmarks/client_wakeup_floor.py --smoke   # CI: 50 chunks, every reader checked

Each reader must have read the whole stream (every byte the server sent), or its CPU per chunk
means nothing: exit 1 otherwise. The full form writes docs/results/client_wakeup_floor.md.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import (  # noqa: E402
    add_smoke_flag,
    output_path,
    write_json,
    write_results,
)
from harness.server.procs import free_port  # noqa: E402

SERVER = r"""
import asyncio, sys, time
port, chunks, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
async def handle(reader, writer):
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    due = time.monotonic()
    for i in range(chunks):
        due += interval
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        event = b'data: {"text":"x","meta_info":{"completion_tokens":%d}}\n\n' % i
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print("ready", flush=True)
    await server.serve_forever()
asyncio.run(main())
"""
REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def stream_bytes(chunks: int) -> int:
    """What SERVER sends for `chunks` events, in bytes: what a reader that read it all counted."""
    head = len(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n") + len(b"0\r\n\r\n")
    events = (
        b'data: {"text":"x","meta_info":{"completion_tokens":%d}}\n\n' % i for i in range(chunks)
    )
    return head + sum(len(b"%x\r\n%s\r\n" % (len(e), e)) for e in events)


def blocking(port: int) -> tuple[float, int]:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(REQUEST)
        start, total = time.process_time(), 0
        while data := sock.recv(65536):
            total += len(data)
        return time.process_time() - start, total


class _Reader(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None]):
        self.done = done
        self.total = 0

    def data_received(self, data: bytes) -> None:
        self.total += len(data)  # one addition: the floor stays a floor

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set_result(None)


async def _protocol(port: int) -> tuple[float, int]:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    transport, reader = await loop.create_connection(lambda: _Reader(done), "127.0.0.1", port)
    transport.write(REQUEST)
    start = time.process_time()
    await done
    return time.process_time() - start, reader.total


def measure(reader: str, port: int) -> tuple[float, int]:
    """(CPU seconds, bytes read) of one reader over the whole stream."""
    if reader == "blocking recv":
        return blocking(port)
    if reader == "asyncio Protocol":
        return asyncio.run(_protocol(port))
    import uvloop

    return uvloop.run(_protocol(port))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--interval", type=float, default=0.011, help="seconds between chunks")
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/out/client_wakeup_floor.json"
    )
    add_smoke_flag(parser)
    args = parser.parse_args()
    if args.smoke:
        args.chunks = min(args.chunks, 50)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), str(args.chunks), str(args.interval)],
        stdout=subprocess.PIPE,
        text=True,
    )
    expected = stream_bytes(args.chunks)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        rows = []
        for reader in ("blocking recv", "asyncio Protocol", "uvloop Protocol"):
            cpu, read = measure(reader, port)
            per_1k = 1000 * cpu / args.chunks
            rows.append({"reader": reader, "cpu_s_per_1k_chunks": round(per_1k, 4), "bytes": read})
    finally:
        server.terminate()
        server.wait(timeout=10)
    table = Table(title=f"CPU per 1,000 chunks, one every {1000 * args.interval:g} ms (no parsing)")
    table.add_column("reader")
    table.add_column("CPU s / 1k chunks", justify="right")
    for row in rows:
        table.add_row(row["reader"], f"{row['cpu_s_per_1k_chunks']:.3f}")
    Console().print(table)
    report = {"chunks": args.chunks, "interval_s": args.interval, "readers": rows}
    write_json(output_path(args.json, args.smoke), report, "client_wakeup_floor")
    short = [
        f"{r['reader']} read {r['bytes']} of {expected} bytes"
        for r in rows
        if r["bytes"] != expected
    ]
    notes = (f"{args.chunks} chunks; a loopback server, real sockets, no simulator.",)
    write_results("client_wakeup_floor", [table], simulated=False, smoke=args.smoke, notes=notes)
    if short:
        raise SystemExit(f"a reader missed part of the stream: {'; '.join(short)}")


if __name__ == "__main__":
    main()
