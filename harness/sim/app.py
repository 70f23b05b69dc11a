"""SGLang's HTTP surface, served by FastAPI as SGLang does (reference/sglang.md §3, §6-7)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from harness.sim.cli import reported_args
from harness.sim.engine import Chunk, Engine, SimRequest
from harness.sim.faults import Faults
from harness.sim.perf_model import MemoryPlan
from harness.sim.text import token_text

log = logging.getLogger("sglang.srt.entrypoints.http_server")

SGLANG_VERSION = "0.5.23"
FLUSH_TEXT = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)"
)


@dataclass
class ServerState:
    engine: Engine
    args: dict[str, Any]
    launch_command: list[str]
    plan: MemoryPlan
    simulator: dict[str, Any]
    status: str = "Starting"  # -> "Up" after the warm-up request, like SGLang
    started_at: float = field(default_factory=time.time)
    faults: Faults = field(default_factory=Faults)
    stop_listening: Callable[[], None] | None = None  # set by main once uvicorn exists
    generation_requests: int = 0

    def admit(self, request: SimRequest) -> None:
        """Hand a client's generation request to the engine, applying the request faults."""
        self.generation_requests += 1
        n = self.generation_requests
        if self.faults.stall_request == n:
            request.stalled = True
            log.warning("simulator: fault injected, request %s stalls after its first token", n)
        self.engine.submit(request)
        refuse_after = self.faults.refuse_connections_after
        if refuse_after and n == refuse_after and self.stop_listening is not None:
            self.stop_listening()

    @property
    def legacy(self) -> bool:
        """Speak SGLang 0.5.1.post3 (endpoints, metrics, per-request fields) instead of 0.5.23."""
        return self.simulator.get("sglang_version") == "0.5.1"

    @property
    def served_model_name(self) -> str:
        return self.args.get("served_model_name") or self.args["model_path"]


def _error(status: int, message: str) -> JSONResponse:
    body = {"object": "error", "message": message, "type": "BadRequestError", "code": status}
    return JSONResponse(body, status_code=status)


async def _json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except json.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI()
    engine = state.engine
    key = state.args.get("api_key")
    if key:

        @app.middleware("http")
        async def authenticate(request: Request, call_next):
            """SGLang's add_api_key_middleware: every path but /health* and /metrics needs
            `Authorization: Bearer <key>`."""
            path = request.url.path
            if request.method == "OPTIONS" or path.startswith(("/health", "/metrics")):
                return await call_next(request)
            if request.headers.get("Authorization") != f"Bearer {key}":
                return JSONResponse({"error": "Unauthorized"}, status_code=401)
            return await call_next(request)

    # SGLang echoes its server args, key included; the simulator leaves the key out (the harness
    # records only chosen keys, but a copy of this answer must never be a leak).
    launch_command = [
        "<redacted>" if i and state.launch_command[i - 1] == "--api-key" else part
        for i, part in enumerate(state.launch_command)
    ]

    def server_info() -> dict[str, Any]:
        version = "0.5.1" if state.legacy else "0.5.23"
        args = {k: v for k, v in reported_args(state.args, version).items() if k != "api_key"}
        # Which GPUs this server runs on (the environment it was started with), as a GPU box's
        # operator would check it: the harness records it per trial.
        gpus = state.simulator.get("cuda_visible_devices")
        internal: dict[str, Any] = {
            **args,
            "cuda_visible_devices": gpus,
            "last_gen_throughput": engine.counters.last_gen_throughput,
            "memory_usage": {
                "weight": round(state.plan.weights_mib / 1024, 2),
                "kvcache": round(state.plan.kv_pool_mib / 1024, 2),
                "token_capacity": state.plan.kv_tokens,
                "graph" if version == "0.5.23" else "cuda_graph": round(
                    state.plan.graph_mib / 1024, 2
                ),
            },
        }
        accept = engine.avg_accept_length()
        if accept is not None:
            internal["avg_spec_accept_length"] = accept
        if state.legacy:
            internal["load"] = len(engine.running) + len(engine.waiting)
            return {
                **args,
                "status": "ready" if state.status == "Up" else "starting",
                "max_total_num_tokens": state.plan.kv_tokens,
                "max_req_input_len": state.plan.kv_tokens - 1,
                "internal_states": [internal],
                "version": "0.5.1.post3",
                "simulator": state.simulator,
            }
        return {
            **args,
            "launch_command": launch_command,
            "cuda_visible_devices": gpus,
            "status": "ready" if state.status == "Up" else "starting",
            "max_total_num_tokens": state.plan.kv_tokens,
            "startup_time": state.started_at,
            "internal_states": [internal],
            "version": SGLANG_VERSION,
            "frontend": "python",
            "simulator": state.simulator,
        }

    if state.legacy:  # 0.5.1 has only /get_server_info and /get_model_info

        @app.get("/get_server_info")
        async def get_server_info_legacy() -> dict[str, Any]:
            return server_info()

        @app.get("/get_model_info")
        async def model_info_legacy() -> dict[str, Any]:
            return {
                "model_path": state.args["model_path"],
                "tokenizer_path": state.args.get("tokenizer_path") or state.args["model_path"],
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
            }

    else:

        @app.get("/server_info")
        async def get_server_info() -> dict[str, Any]:
            return server_info()

        @app.get("/get_server_info")
        async def get_server_info_deprecated() -> dict[str, Any]:
            log.warning("Endpoint '/get_server_info' is deprecated; use '/server_info' instead.")
            return server_info()

        @app.get("/model_info")
        async def model_info() -> dict[str, Any]:
            return {
                "model_path": state.args["model_path"],
                "served_model_name": state.served_model_name,
                "is_generation": True,
                "reasoning_parser": state.args.get("reasoning_parser"),
                "architectures": [state.simulator["target_architecture"]],
            }

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": state.served_model_name,
            "object": "model",
            "owned_by": "sglang",
            "root": state.args["model_path"],
        }
        return {"object": "list", "data": [card]}

    @app.api_route("/health", methods=["GET"])
    @app.api_route("/health_generate", methods=["GET"])
    async def health() -> Response:
        if state.status != "Up":
            return Response(status_code=503)
        request = engine.new_request("health", 1, ignore_eos=True, thinking=False)
        engine.submit(request)
        try:
            async with asyncio.timeout(20):
                await request.queue.get()
        except TimeoutError:
            log.error("Health check failed. Server couldn't get a response from detokenizer.")
            return Response(status_code=503)
        return Response(status_code=200)

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache() -> Response:
        ok = engine.flush()
        if ok:
            log.info("Cache flushed successfully!")
        return PlainTextResponse(FLUSH_TEXT, status_code=200 if ok else 400)

    @app.get("/metrics")
    async def metrics() -> Response:
        if not state.args.get("enable_metrics"):
            return Response(status_code=404)
        return PlainTextResponse(prometheus_text(state))

    @app.post("/v1/chat/completions")
    async def chat_completions(http_request: Request) -> Response:
        body = await _json_body(http_request)
        if body is None:
            return _error(400, "request body is not a JSON object")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "'messages' must be a non-empty list")
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return _error(400, f"max_tokens must be a positive integer, got {max_tokens!r}")
        kwargs = body.get("chat_template_kwargs") or {}
        thinking = bool(kwargs.get("thinking", kwargs.get("enable_thinking", True)))
        request = engine.new_request(
            prompt, max_tokens, ignore_eos=bool(body.get("ignore_eos", False)), thinking=thinking
        )
        state.admit(request)
        separate = state.args.get("reasoning_parser") is not None and body.get(
            "separate_reasoning", True
        )
        completion = _Completion(state, request, separate)
        completion.spec_details = bool(body.get("return_spec_tokens_details"))
        if body.get("stream"):
            options = body.get("stream_options") or {}
            completion.continuous_usage = bool(options.get("continuous_usage_stats"))
            return StreamingResponse(
                completion.stream(bool(options.get("include_usage"))),
                media_type="text/event-stream",
            )
        return JSONResponse(await completion.whole())

    @app.post("/generate")
    async def generate(http_request: Request) -> Response:
        body = await _json_body(http_request)
        if body is None:
            return _error(400, "request body is not a JSON object")
        text = body.get("text")
        if not isinstance(text, str) or not text:
            return _error(400, "'text' must be a non-empty string")
        params = body.get("sampling_params") or {}
        max_new = params.get("max_new_tokens", 128)
        if not isinstance(max_new, int) or max_new < 1:
            return _error(400, f"max_new_tokens must be a positive integer, got {max_new!r}")
        request = engine.new_request(
            text, max_new, ignore_eos=bool(params.get("ignore_eos", False)), thinking=True
        )
        state.admit(request)
        generation = _Generation(state, request)
        if body.get("stream"):
            return StreamingResponse(generation.stream(), media_type="text/event-stream")
        return JSONResponse(await generation.whole())

    return app


def spec_meta(state: ServerState, request: SimRequest) -> dict[str, Any]:
    """SGLang 0.5.23's per-request speculative fields (finished requests with verify steps)."""
    spec = state.engine.model.spec
    if spec is None or request.verify_ct == 0:
        return {}
    if state.legacy:  # 0.5.1.post3 reports only the verify count
        return {"spec_verify_ct": request.verify_ct}
    correct = request.generated - 1 - request.verify_ct  # accepted drafts (bonus and prefill out)
    proposed = request.verify_ct * (spec.draft_tokens - 1)
    return {
        "spec_verify_ct": request.verify_ct,
        "spec_accept_length": request.generated / request.verify_ct,
        "spec_accept_rate": correct / proposed if proposed else 0.0,
        "spec_num_correct_drafts": correct,
        "spec_num_proposed_drafts": proposed,
    }


class _Generation:
    """SGLang's native /generate: cumulative text and meta_info on every chunk."""

    def __init__(self, state: ServerState, request: SimRequest):
        self.state = state
        self.request = request
        self.text: list[str] = []
        self.started = time.time()

    def _meta(self, finish: str | None) -> dict[str, Any]:
        r = self.request
        meta: dict[str, Any] = {
            "id": r.rid,
            "finish_reason": None,
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.generated,
            "cached_tokens": 0,
        }
        if not self.state.legacy:
            meta["reasoning_tokens"] = min(r.generated, r.thinking_tokens)
        if finish is not None:
            meta["finish_reason"] = (
                {"type": "length", "length": r.generated}
                if finish == "length"
                else {"type": "stop", "matched": None}
            )
            meta.update(spec_meta(self.state, r))
            meta["e2e_latency"] = round(time.time() - self.started, 6)
        return meta

    def _add(self, chunk: Chunk) -> None:
        seed = int(self.request.rid, 16)
        for i in chunk.tokens:
            self.text.append(token_text(seed, i, i < self.request.thinking_tokens))

    async def stream(self) -> AsyncIterator[str]:
        finished = False
        try:
            while not finished:
                chunk = await self.request.queue.get()
                self._add(chunk)
                finished = chunk.finish_reason is not None
                payload = {
                    "text": "".join(self.text),
                    "meta_info": self._meta(chunk.finish_reason),
                    "index": 0,
                }
                yield f"data: {json.dumps(payload)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            if not finished:
                self.state.engine.abort(self.request)

    async def whole(self) -> dict[str, Any]:
        finish = None
        while finish is None:
            chunk = await self.request.queue.get()
            self._add(chunk)
            finish = chunk.finish_reason
        return {"text": "".join(self.text), "meta_info": self._meta(finish), "index": 0}


class _Completion:
    """Turns engine chunks into OpenAI chat-completion chunks (one chunk per verify step)."""

    def __init__(self, state: ServerState, request: SimRequest, separate_reasoning: bool):
        self.state = state
        self.request = request
        self.separate = separate_reasoning
        self.id = uuid.uuid4().hex
        self.created = int(time.time())
        self.continuous_usage = False  # stream_options.continuous_usage_stats
        self.spec_details = False  # return_spec_tokens_details (0.5.23)

    def _delta(self, chunk: Chunk) -> dict[str, str]:
        r = self.request
        seed = int(r.rid, 16)
        reasoning, content = [], []
        for i in chunk.tokens:
            thinking = i < r.thinking_tokens
            text = token_text(seed, i, thinking)
            if not self.separate:
                if i == 0 and r.thinking_tokens:
                    text = "<think>" + text
                if i == r.thinking_tokens and r.thinking_tokens:
                    text = "</think>" + text
            (reasoning if thinking and self.separate else content).append(text)
        delta: dict[str, str] = {}
        if reasoning:
            delta["reasoning_content"] = "".join(reasoning)
        if content:
            delta["content"] = "".join(content)
        return delta

    def usage(self) -> dict[str, Any]:
        r = self.request
        # 0.5.1 always reports 0 reasoning tokens for chat completions
        reasoning = 0 if self.state.legacy else min(r.generated, r.thinking_tokens)
        usage: dict[str, Any] = {
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.generated,
            "total_tokens": r.prompt_tokens + r.generated,
            "reasoning_tokens": reasoning,
        }
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def _chunk(self, choices: list[dict[str, Any]], usage: Any = None) -> str:
        payload = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.state.served_model_name,
            "choices": choices,
            "usage": usage,
        }
        wanted = self.spec_details and not choices and not self.state.legacy  # 0.5.23 only
        details = spec_meta(self.state, self.request) if wanted else {}
        if details:
            payload["sglext"] = {"spec_tokens_details": details}
        return f"data: {json.dumps(payload)}\n\n"

    async def stream(self, include_usage: bool) -> AsyncIterator[str]:
        finished = False
        try:
            first = True
            while not finished:
                chunk = await self.request.queue.get()
                delta = self._delta(chunk)
                if first:
                    delta = {"role": "assistant", **delta}
                    first = False
                finished = chunk.finish_reason is not None
                choice = {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": chunk.finish_reason,
                    "matched_stop": None,
                }
                yield self._chunk([choice], self.usage() if self.continuous_usage else None)
            if include_usage:
                yield self._chunk([], self.usage())
            yield "data: [DONE]\n\n"
        finally:
            if not finished:
                self.state.engine.abort(self.request)

    async def whole(self) -> dict[str, Any]:
        reasoning, content, finish = [], [], None
        while finish is None:
            chunk = await self.request.queue.get()
            delta = self._delta(chunk)
            reasoning.append(delta.get("reasoning_content", ""))
            content.append(delta.get("content", ""))
            finish = chunk.finish_reason
        message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
        if self.separate:
            message["reasoning_content"] = "".join(reasoning)
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.state.served_model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": self.usage(),
        }


def prometheus_text(state: ServerState) -> str:
    """The metric names SGLang exports (§6) for the version spoken, with its label set."""
    engine, c = state.engine, state.engine.counters
    labels = f'model_name="{state.served_model_name}",engine_type="unified",tp_rank="0"'
    if not state.legacy:
        labels += ',pp_rank="0"'
    gauges = {
        "sglang:num_running_reqs": len(engine.running),
        "sglang:num_queue_reqs": len(engine.waiting),
        "sglang:gen_throughput": c.last_gen_throughput,
    }
    if state.legacy:
        gauges["sglang:num_used_tokens"] = engine.kv_used()
        gauges["sglang:token_usage"] = engine.kv_used() / max(state.plan.kv_tokens, 1)
        gauges["sglang:cache_hit_rate"] = 0.0
    else:
        gauges["sglang:max_total_num_tokens"] = state.plan.kv_tokens
        gauges["sglang:is_cuda_graph"] = int(engine.model.dep.cuda_graph)
    if engine.speculative:
        spec = engine.model.spec
        assert spec is not None
        gauges["sglang:spec_accept_length"] = c.last_accept_len or 0.0
        if not state.legacy:
            gauges["sglang:spec_num_steps"] = spec.steps
            gauges["sglang:spec_num_draft_tokens"] = spec.draft_tokens
    counters = {
        "sglang:prompt_tokens_total": c.prompt_tokens,
        "sglang:generation_tokens_total": c.generation_tokens,
        "sglang:num_requests_total": c.requests,
    }
    if engine.speculative and not state.legacy:
        counters["sglang:spec_verify_calls_total"] = c.verify_calls
    lines = []
    for name, value in gauges.items():
        lines += [f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)}"]
    for name, value in counters.items():
        lines += [f"# TYPE {name} counter", f"{name}{{{labels}}} {float(value)}"]
    return "\n".join(lines) + "\n"
