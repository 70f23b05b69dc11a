"""One server's surface as the harness meets it, gathered the same way from real SGLang and from
the simulator so tests/real/test_conformance.py can compare the two: /server_info, /metrics,
one streamed /generate and one streamed chat completion, the log lines the harness parses, and
how the server ends when stopped."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness.measure.prometheus import prometheus_values
from harness.server.logs import parse_decode_line, parse_pool_sizes, parse_prefill_line
from harness.server.process import Server
from harness.server.startup import startup_phases
from harness.sglang.surfaces import READY_LINE

ROOT = Path(__file__).resolve().parents[2]
# Every /metrics name the harness's sources read (measure/, server/, trial.py).
HARNESS_METRICS = sorted(
    {
        name
        for path in [
            *(ROOT / "harness").glob("measure/*.py"),
            *(ROOT / "harness").glob("server/*.py"),
        ]
        for name in re.findall(r"sglang:[a-z_]+", path.read_text())
    }
)


@dataclass
class Surface:
    info: dict[str, Any] = field(default_factory=dict)
    metrics: set[str] = field(default_factory=set)
    generate_chunk: set[str] = field(default_factory=set)  # keys of a streamed /generate chunk
    meta_info: set[str] = field(default_factory=set)  # its meta_info's keys (last chunk)
    generate_done: bool = False  # the stream ends with data: [DONE]
    chat_chunk: set[str] = field(default_factory=set)
    chat_delta: set[str] = field(default_factory=set)  # union over the chunks' deltas
    chat_usage: set[str] = field(default_factory=set)
    chat_done: bool = False
    log_lines: dict[str, bool] = field(default_factory=dict)  # parsed line kind -> found
    graph_label: str | None = None  # the decode line's "<device> graph" label
    startup_phases: set[str] = field(default_factory=set)
    stop_returncode: int | None = None


def _sse(response: httpx.Response) -> tuple[list[dict], bool]:
    chunks, done = [], False
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
        elif data:
            chunks.append(json.loads(data))
    return chunks, done


def probe(server: Server) -> Surface:
    """Everything but the stop, from a ready server."""
    s = Surface(info=server.server_info())
    s.startup_phases = set(startup_phases(s.info))
    with httpx.Client(base_url=server.command.base_url, timeout=120) as client:
        body = {"text": "The train leaves at", "stream": True}
        body["sampling_params"] = {"max_new_tokens": 48, "temperature": 0, "ignore_eos": True}
        with client.stream("POST", "/generate", json=body) as response:
            chunks, s.generate_done = _sse(response)
        s.generate_chunk = set(chunks[-1])
        s.meta_info = set(chunks[-1]["meta_info"])
        chat = {
            "model": "default",
            "messages": [{"role": "user", "content": "Why is the sky blue?"}],
            "max_tokens": 8,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with client.stream("POST", "/v1/chat/completions", json=chat) as response:
            chunks, s.chat_done = _sse(response)
        s.chat_chunk = set().union(*(set(c) for c in chunks))
        s.chat_delta = set().union(*(set(c["choices"][0]["delta"]) for c in chunks if c["choices"]))
        s.chat_usage = set(next(c["usage"] for c in chunks if c.get("usage")))
        s.metrics = set(prometheus_values(client.get("/metrics").text))
    text = server.log_text()
    lines = text.splitlines()
    decode = [d for d in map(parse_decode_line, lines) if d is not None]
    sizes = parse_pool_sizes(text)
    s.log_lines = {
        "ready": any(READY_LINE in ln for ln in lines),
        "max_total_num_tokens=": sizes.max_total_num_tokens is not None,
        "KV Cache is allocated": sizes.device_tokens is not None,
        "Prefill batch": any(parse_prefill_line(ln) for ln in lines),
        "Decode batch": bool(decode),
        "Engine startup timings": "Engine startup timings (s):" in text,
        "Load weight begin/end": "Load weight begin" in text and "Load weight end" in text,
    }
    s.graph_label = decode[0].graph_label if decode else None
    return s
