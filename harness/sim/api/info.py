"""The endpoints that are not generation: server and model info, health, cache flush, metrics.

Which info paths exist is the surface's (`harness.sglang`): the current surface serves
/server_info and /model_info, and /get_server_info with a deprecation warning; 0.5.1 serves only
/get_server_info and /get_model_info.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, Query
from fastapi.responses import PlainTextResponse, Response

from harness.sim.api.prometheus import prometheus_text
from harness.sim.api.state import ServerState
from harness.sim.cli import reported_args

log = logging.getLogger("sglang.srt.entrypoints.http_server")

# 0.5.23 (and 0.5.22) entrypoints/http_server.py::flush_cache: the success text; a refusal is
# 400 with the scheduler's message, or "Flush cache failed.\n" when it has none. 0.5.1.post3
# answers both with the success text (only the status code differs).
FLUSH_TEXT = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)\n"
)
FLUSH_FAILED_TEXT = "Flush cache failed.\n"
# 0.5.23 managers/scheduler_components/flush_wrapper.py: a deferred flush (timeout > 0)
FLUSH_TIMED_OUT_TEXT = "Timed out waiting for idle state."
FLUSH_BUSY_TEXT = "Another flush_cache is already in progress."


def server_info(state: ServerState, launch_command: list[str]) -> dict[str, Any]:
    """`_server_info`, as a release specsweep has not read may answer it (the faults
    report-version and drop-server-info-field)."""
    info = _server_info(state, launch_command)
    if state.faults.report_version is not None:
        info["version"] = state.faults.report_version
    if state.faults.drop_server_info_field is not None:
        info.pop(state.faults.drop_server_info_field, None)
    return info


def _server_info(state: ServerState, launch_command: list[str]) -> dict[str, Any]:
    """Effective args plus state, in the shape of the surface spoken (reference/sglang.md §3).

    0.5.23 `entrypoints/http_server.py::server_info` returns `utils/common.py::build_server_info`
    (`ServerArgs.resolved_dict()`, "launch_command", the scheduler's `get_init_info`, "kv_events")
    plus "startup_time", "internal_states", "version" and "frontend". The resolved decode graph
    batch is `cuda_graph_config["decode"]["max_bs"]` there; the top-level `cuda_graph_max_bs_decode`
    stays what was asked. 0.5.1.post3's /get_server_info is `dataclasses.asdict(server_args)`, the
    scheduler info, "internal_states" and "version". Neither has a CUDA_VISIBLE_DEVICES field (the
    simulator keeps it under "simulator", which the harness does not read).
    """
    engine, facts = state.engine, state.surface
    args = {k: v for k, v in reported_args(state.args, facts.version).items() if k != "api_key"}
    graph_gb = round(state.plan.graph_mib / 1024, 3)
    if facts.legacy:
        internal: dict[str, Any] = {
            **args,
            "last_gen_throughput": engine.counters.last_gen_throughput,
            "memory_usage": {
                "weight": round(state.plan.weights_mib / 1024, 2),
                "kvcache": round(state.plan.kv_pool_mib / 1024, 2),
                "token_capacity": state.plan.kv_tokens,
                "cuda_graph": round(graph_gb, 2),
            },
        }
        _add_accept_length(internal, state)
        internal["load"] = len(engine.running) + len(engine.waiting)
        return {
            **args,
            "status": "ready" if state.status == "Up" else "starting",
            "max_total_num_tokens": state.plan.kv_tokens,
            "max_req_input_len": state.plan.kv_tokens - 1,
            "internal_states": [internal],
            "version": facts.release,
            "simulator": {**state.simulator, **state.engine.lag.report()},
        }
    args = _current_graph_args(args, state)
    captured = args["cuda_graph_config"]["decode"]["max_bs"]
    internal = {
        **args,
        "world_size": args.get("tp_size", 1),
        "startup_time": _scheduler_startup(state.startup_time),
        "effective_max_running_requests_per_dp": state.args.get("max_running_requests"),
        "last_gen_throughput": engine.counters.last_gen_throughput,
        "memory_usage": {
            "weight": round(state.plan.weights_mib / 1024, 3),
            "kvcache": round(state.plan.kv_pool_mib / 1024, 3),
            "startup_available": None,
            "token_capacity": state.plan.kv_tokens,
            "token_capacity_swa": None,
            "graph": {"decode": graph_gb} if captured else {},
        },
        "disaggregation_mode": "null",
        # what the decode runner captured (0.5.23 tp_worker.py::get_decode_cuda_graph_bs): on a
        # CPU SGLang captures none (its decode lines read "cpu graph: False"), an empty list
        "decode_cuda_graph_bs": list(state.args.get("sim_graph_bs") or [])
        if captured and state.args.get("device", "cuda") != "cpu"
        else [],
        "decode_cuda_graph_memory_gb": graph_gb if captured else 0.0,
    }
    _add_accept_length(internal, state)
    return {
        **args,
        "launch_command": launch_command,
        "status": "ready" if state.status == "Up" else "starting",
        "max_total_num_tokens": state.plan.kv_tokens,
        "max_req_input_len": state.plan.kv_tokens - 1,
        "hicache_object_layout": None,
        "kv_events": None,
        "startup_time": state.startup_time,
        "internal_states": [internal],
        "version": facts.release,
        "frontend": "python",
        "simulator": {**state.simulator, **state.engine.lag.report()},
    }


def _scheduler_startup(startup: dict[str, Any] | None) -> dict[str, Any] | None:
    """A scheduler's own startup_time (0.5.23 `internal_state.py`): the engine's without the
    tokenizer's end-to-end phase."""
    if startup is None:
        return None
    return {k: v for k, v in startup.items() if k != "tokenizer_e2e"}


def _add_accept_length(internal: dict[str, Any], state: ServerState) -> None:
    accept = state.engine.avg_accept_length()
    if accept is not None:
        internal["avg_spec_accept_length"] = accept


def _current_graph_args(args: dict[str, Any], state: ServerState) -> dict[str, Any]:
    """0.5.23's graph fields: the per-phase flags as given, the resolution in cuda_graph_config
    (`model_executor/cuda_graph_config.py::CudaGraphConfig`, serialised whole by `_plain`)."""
    enabled = state.args.get("cuda_graph_enabled", True)
    prefill_off = args.get("cuda_graph_backend_prefill") == "disabled"
    phase = {"bs": None, "tc_compiler": "eager", "max_context_size": None}
    phase |= {"full_prefill_max_req": None, "full_prefill_prefix_chunk_tokens": None}
    phase |= {"max_seq_len": None}
    return {
        **args,
        "cuda_graph_max_bs_decode": state.args.get("sim_requested_graph_max_bs"),
        "cuda_graph_config": {
            "decode": {
                **phase,
                "backend": "full" if enabled else "disabled",
                "max_bs": args.get("cuda_graph_max_bs_decode") if enabled else None,
            },
            "prefill": {**phase, "backend": "disabled" if prefill_off else "breakable"},
        },
    }


def model_info(state: ServerState) -> dict[str, Any]:
    if state.legacy:
        return {
            "model_path": state.args["model_path"],
            "tokenizer_path": state.args.get("tokenizer_path") or state.args["model_path"],
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
        }
    return {
        "model_path": state.args["model_path"],
        "served_model_name": state.served_model_name,
        "is_generation": True,
        "reasoning_parser": state.args.get("reasoning_parser"),
        "architectures": [state.simulator["target_architecture"]],
    }


def add_info_routes(app: FastAPI, state: ServerState) -> None:
    engine, facts = state.engine, state.surface
    # SGLang echoes its server args, key included; the simulator leaves the key out (the harness
    # records only chosen keys, but a copy of this answer must never be a leak).
    launch_command = [
        "<redacted>" if i and state.launch_command[i - 1] == "--api-key" else part
        for i, part in enumerate(state.launch_command)
    ]

    @app.get(facts.server_info_path)
    async def get_server_info() -> dict[str, Any]:
        return server_info(state, launch_command)

    if facts.deprecated_server_info_path:
        deprecated = facts.deprecated_server_info_path

        @app.get(deprecated)
        async def get_server_info_deprecated() -> dict[str, Any]:
            log.warning(
                "Endpoint '%s' is deprecated; use '%s' instead.",
                deprecated,
                facts.server_info_path,
            )
            return server_info(state, launch_command)

    @app.get(facts.model_info_path)
    async def get_model_info() -> dict[str, Any]:
        return model_info(state)

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

    pending: list[bool] = []  # a deferred flush waiting for idle (SchedulerFlushWrapper)

    async def flush(timeout: float) -> tuple[bool, str]:
        """0.5.23 `SchedulerFlushWrapper.handle`: timeout 0 flushes now or fails; a timeout
        waits for `is_fully_idle` up to that many seconds; one deferred flush at a time."""
        if pending:
            return False, FLUSH_BUSY_TEXT
        if timeout > 0 and not engine.fully_idle:
            pending.append(True)
            try:
                if not await engine.wait_fully_idle(timeout):
                    log.warning("Deferred flush_cache timed out while waiting for idle state.")
                    return False, FLUSH_TIMED_OUT_TEXT
            finally:
                pending.clear()
        ok = engine.flush()
        if ok:
            log.info("Cache flushed successfully!")
        return ok, FLUSH_TEXT if ok or facts.legacy else FLUSH_FAILED_TEXT

    if not facts.flush_waits_for_idle:  # 0.5.1.post3: no timeout parameter

        @app.api_route("/flush_cache", methods=["GET", "POST"])
        async def flush_cache_legacy() -> Response:
            ok, text = await flush(0.0)
            return PlainTextResponse(text, status_code=200 if ok else 400)

    else:

        @app.api_route("/flush_cache", methods=["GET", "POST"])
        async def flush_cache(timeout: float = Query(0.0, ge=0.0)) -> Response:
            ok, text = await flush(timeout)
            return PlainTextResponse(text, status_code=200 if ok else 400)

    @app.get("/metrics")
    async def metrics() -> Response:
        if not state.args.get("enable_metrics"):
            return Response(status_code=404)
        return PlainTextResponse(prometheus_text(state))
