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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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


def blocking(port: int) -> float:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(REQUEST)
        start = time.process_time()
        while sock.recv(65536):
            pass
        return time.process_time() - start


class _Reader(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None]):
        self.done = done

    def data_received(self, data: bytes) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set_result(None)


async def _protocol(port: int) -> float:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    transport, _ = await loop.create_connection(lambda: _Reader(done), "127.0.0.1", port)
    transport.write(REQUEST)
    start = time.process_time()
    await done
    return time.process_time() - start


def measure(reader: str, port: int) -> float:
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
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), str(args.chunks), str(args.interval)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        rows = []
        for reader in ("blocking recv", "asyncio Protocol", "uvloop Protocol"):
            per_1k = 1000 * measure(reader, port) / args.chunks
            rows.append({"reader": reader, "cpu_s_per_1k_chunks": round(per_1k, 4)})
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
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
