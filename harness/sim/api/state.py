"""What every endpoint of the simulated server shares: its state, error bodies, spec fields."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from harness.sglang.surfaces import CURRENT, Surface, surface
from harness.sim.engine import Engine
from harness.sim.faults import Faults
from harness.sim.model.perf_model import MemoryPlan
from harness.sim.request import SimRequest

log = logging.getLogger("sglang.srt.entrypoints.http_server")
# SGLang 0.5.23 managers/schedule_batch.py retract_decode: the last request of a decode batch that
# retraction cannot make room for is aborted with this message and HTTPStatus.INTERNAL_SERVER_ERROR.
ABORT_MESSAGE = (
    "Out of memory even after retracting all other requests in the decode batch. "
    "Aborting the last request."
)
ABORT_STATUS = (500, "INTERNAL_SERVER_ERROR")  # HTTPStatus.INTERNAL_SERVER_ERROR: value, name
# What the die-after-request fault's scheduler dies of (a crash, not a memory failure).
DIE_MESSAGE = "RuntimeError: CUDA error: an illegal memory access was encountered"


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
    die: Callable[[str], None] | None = None  # set by main: a scheduler exception, like SGLang's
    generation_requests: int = 0
    # 0.5.23's start-up durations by phase (main._startup_time; None for 0.5.1): /server_info's
    # startup_time and /metrics' sglang:startup_time_seconds.
    startup_time: dict[str, Any] | None = None

    def admit(self, request: SimRequest) -> None:
        """Hand a client's generation request to the engine, applying the request faults."""
        self.generation_requests += 1
        n = self.generation_requests
        if self.faults.stall_request == n:
            request.stalled = True
            log.warning("simulator: fault injected, request %s stalls after its first token", n)
        if self.faults.abort_request == n:
            request.abort = ABORT_MESSAGE
        if self.faults.die_after_request == n:
            request.die_after = True
        if self.engine.speculative:
            request.lossy_after = self.faults.lossy_after_tokens
        self.engine.submit(request)
        refuse_after = self.faults.refuse_connections_after
        if refuse_after and n == refuse_after and self.stop_listening is not None:
            self.stop_listening()

    @property
    def surface(self) -> Surface:
        """The SGLang surface spoken (endpoints, metrics, per-request fields)."""
        return surface(self.simulator.get("sglang_version", CURRENT))

    @property
    def legacy(self) -> bool:
        """Speak SGLang 0.5.1.post3's formats instead of the current ones."""
        return self.surface.legacy

    @property
    def served_model_name(self) -> str:
        return self.args.get("served_model_name") or self.args["model_path"]


def finish_request(state: ServerState, request: SimRequest) -> None:
    """After a request's last chunk went out: the die-after-request fault kills the server."""
    if request.die_after and state.die is not None:
        state.die(DIE_MESSAGE + " (simulated fault at the end of a request)")


def error_response(status: int, message: str) -> JSONResponse:
    body = {"object": "error", "message": message, "type": "BadRequestError", "code": status}
    return JSONResponse(body, status_code=status)


async def json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except json.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def reasoning_counted(state: ServerState, request: SimRequest) -> int:
    """The reasoning tokens SGLang counts: it knows where thinking ends only from the reasoning
    parser's end marker (0.5.23 scheduler.py: think_end_ids from --reasoning-parser), so without
    one every usage and meta_info says 0, as real SGLang 0.5.23 does."""
    return request.thinking_tokens if state.args.get("reasoning_parser") is not None else 0


def spec_meta(state: ServerState, request: SimRequest) -> dict[str, Any]:
    """SGLang's per-request speculative fields (finished requests with verify steps)."""
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
        # 0.5.23 tokenizer_manager.py: meta_info carries it when non-empty, and chat's
        # sglext.spec_tokens_details through openai/utils.py spec_tokens_details_from_meta_info
        "spec_correct_drafts_histogram": list(request.drafts_histogram),
    }
