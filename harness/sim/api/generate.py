"""SGLang's native `/generate`: cumulative text and meta_info on every chunk.

The prompt is `text` or `input_ids` (0.5.23 `managers/io_struct.py::GenerateReqInput`: one of
text, input_ids or input_embeds; neither is refused with its `_validate_inputs` message).
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from harness.sim.api import streaming
from harness.sim.api.completions import prompt_of
from harness.sim.api.state import (
    ABORT_STATUS,
    ServerState,
    error_response,
    json_body,
    reasoning_counted,
    spec_meta,
)
from harness.sim.request import Chunk, SimRequest
from harness.sim.text import id_text

INPUT_REQUIRED = "Either text, input_ids or input_embeds should be provided."


def add_generate_route(app: FastAPI, state: ServerState) -> None:
    @app.post("/generate")
    async def generate(http_request: Request) -> Response:
        body = await json_body(http_request)
        if body is None:
            return error_response(400, "request body is not a JSON object")
        prompt = prompt_of(body.get("text")) or prompt_of(body.get("input_ids"))
        if prompt is None or isinstance(body.get("text"), list):  # a batch: not simulated
            return error_response(400, INPUT_REQUIRED)
        params = body.get("sampling_params") or {}
        max_new = params.get("max_new_tokens", 128)
        if not isinstance(max_new, int) or max_new < 1:
            return error_response(
                400, f"max_new_tokens must be a positive integer, got {max_new!r}"
            )
        request = state.engine.new_request(
            prompt[0],
            max_new,
            ignore_eos=bool(params.get("ignore_eos", False)),
            thinking=True,
            greedy=_temperature(params) == 0,
            temperature=_temperature(params),
            prompt_tokens=prompt[1],
        )
        state.admit(request)
        generation = _Generation(state, request)
        if body.get("stream"):
            return generation.stream()
        return JSONResponse(await generation.whole())


class _Generation:
    """One /generate request's answer, streamed or whole."""

    def __init__(self, state: ServerState, request: SimRequest):
        self.state = state
        self.request = request
        self.text: list[str] = []
        self.output_ids: list[int] = []
        self.started = time.time()

    def _meta(self, finish: str | None) -> dict[str, Any]:
        r = self.request
        meta: dict[str, Any] = {
            "id": r.rid,
            "finish_reason": None,
            "prompt_tokens": r.prompt_tokens,
            # what this answer carries so far (the engine may be steps ahead of the stream)
            "completion_tokens": len(self.output_ids),
            "cached_tokens": 0,
        }
        if not self.state.legacy:
            meta["reasoning_tokens"] = min(len(self.output_ids), reasoning_counted(self.state, r))
        if finish == "abort":
            # SGLang 0.5.23 schedule_batch.FINISH_ABORT.to_json(), HTTPStatus as its value
            # (orjson): the stream's last chunk before [DONE] (tokenizer_manager.py
            # _handle_abort_finish_reason passes a stream abort through).
            meta["finish_reason"] = {
                "type": "abort",
                "message": r.abort,
                "status_code": ABORT_STATUS[0],
                "err_type": None,
            }
        elif finish is not None:
            meta["finish_reason"] = (
                {"type": "length", "length": r.generated}
                if finish == "length"
                else {"type": "stop", "matched": None}
            )
        if finish is not None:
            meta.update(spec_meta(self.state, r))
            meta["e2e_latency"] = round(time.time() - self.started, 6)
        return meta

    def _add(self, chunk: Chunk) -> None:
        for i in chunk.tokens:
            self.output_ids.append(self.request.token(i))
            self.text.append(id_text(self.output_ids[-1]))

    def stream(self) -> Response:
        return streaming.stream(self.state, self.request, self._event)

    def _event(self, chunk: Chunk) -> dict[str, Any]:
        """The text so far and the meta_info (an abort's too: the last chunk before [DONE])."""
        self._add(chunk)
        if chunk.finish_reason == "abort" and self.state.legacy:
            streaming.cut(self.request)  # 0.5.1.post3 tokenizer_manager raises HTTPException
        event = {
            "text": "".join(self.text),
            "output_ids": list(self.output_ids),  # all so far, as the text (0.5.23)
            "meta_info": self._meta(chunk.finish_reason),
            **streaming.sim_stamps(self.request, chunk.at),
        }
        if self.state.legacy:
            event = {k: v for k, v in event.items() if k != "output_ids"} | {"index": 0}
        return event

    async def whole(self) -> dict[str, Any]:
        finish = None
        async for chunk in streaming.chunks(self.request):
            self._add(chunk)
            finish = chunk.finish_reason
        # tokenizer_manager.py (0.5.23 and 0.5.22 `_handle_batch_output`, 0.5.1.post3 too): a
        # finished non-streaming answer carries the text and every output token id.
        answer = {
            "text": "".join(self.text),
            "output_ids": list(self.output_ids),
            "meta_info": self._meta(finish),
        }
        return answer | ({"index": 0} if self.state.legacy else {})  # 0.5.23 has no index


def _temperature(params: dict) -> float:
    """The request's temperature; SGLang's SamplingParams default is 1."""
    value = params.get("temperature")
    return float(value) if isinstance(value, int | float) else 1.0
