"""OpenAI `/v1/chat/completions` as SGLang serves it: one chunk per verify step, reasoning
separated by the reasoning parser, usage and (on request) speculative details at the end."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from harness.sim.api.state import (
    ABORT_STATUS,
    ServerState,
    error_response,
    finish_request,
    json_body,
    spec_meta,
)
from harness.sim.request import Chunk, SimRequest
from harness.sim.text import id_text


def add_chat_route(app: FastAPI, state: ServerState) -> None:
    @app.post("/v1/chat/completions")
    async def chat_completions(http_request: Request) -> Response:
        body = await json_body(http_request)
        if body is None:
            return error_response(400, "request body is not a JSON object")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return error_response(400, "'messages' must be a non-empty list")
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return error_response(400, f"max_tokens must be a positive integer, got {max_tokens!r}")
        kwargs = body.get("chat_template_kwargs") or {}
        thinking = bool(kwargs.get("thinking", kwargs.get("enable_thinking", True)))
        request = state.engine.new_request(
            prompt,
            max_tokens,
            ignore_eos=bool(body.get("ignore_eos", False)),
            thinking=thinking,
            greedy=_temperature(body) == 0,
            temperature=_temperature(body),
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


class _Completion:
    """Turns engine chunks into OpenAI chat-completion chunks (one chunk per verify step)."""

    def __init__(self, state: ServerState, request: SimRequest, separate_reasoning: bool):
        self.state = state
        self.request = request
        self.separate = separate_reasoning
        self.id = uuid.uuid4().hex
        self.created = int(time.time())
        self.continuous_usage = False  # stream_options.continuous_usage_stats
        self.spec_details = False  # return_spec_tokens_details (current surface only)
        self.delivered = 0  # tokens in the chunks so far (the engine may be steps ahead)

    def _delta(self, chunk: Chunk) -> dict[str, str]:
        r = self.request
        reasoning, content = [], []
        self.delivered += len(chunk.tokens)
        for i in chunk.tokens:
            thinking = i < r.thinking_tokens
            text = id_text(r.token(i))
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
        reasoning = 0 if self.state.legacy else min(self.delivered, r.thinking_tokens)
        usage: dict[str, Any] = {
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": self.delivered,
            "total_tokens": r.prompt_tokens + self.delivered,
            "reasoning_tokens": reasoning,
        }
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def _chunk(
        self, choices: list[dict[str, Any]], usage: Any = None, at: float | None = None
    ) -> str:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.state.served_model_name,
            "choices": choices,
            "usage": usage,
        }
        wanted = self.spec_details and not choices and not self.state.legacy  # not in 0.5.1
        details = spec_meta(self.state, self.request) if wanted else {}
        if details:
            payload["sglext"] = {"spec_tokens_details": details}
        if at is not None:  # simulator only: virtual seconds since receipt (harness.measure.clock)
            payload["sim_elapsed_s"] = round(at - self.request.submitted_at, 9)
            payload["sim_wall_s"] = round(time.monotonic() - self.request.received_wall, 9)
        return f"data: {json.dumps(payload)}\n\n"

    async def stream(self, include_usage: bool) -> AsyncIterator[str]:
        finished = False
        try:
            first = True
            while not finished:
                chunk = await self.request.queue.get()
                if chunk.finish_reason == "abort":
                    finished = True
                    yield self._abort_chunk()
                    break
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
                usage = self.usage() if self.continuous_usage else None
                yield self._chunk([choice], usage, chunk.at)
            if include_usage:
                yield self._chunk([], self.usage())
            yield "data: [DONE]\n\n"
            finish_request(self.state, self.request)
        finally:
            if not finished:
                self.state.engine.abort(self.request)

    def _abort_chunk(self) -> str:
        """SGLang 0.5.23 serving_chat.py: an abort with a status code (a system error: OOM,
        timeout) is one `{"error": ...}` chunk (serving_base.create_streaming_error_response);
        the loop breaks, then the sglext and usage chunks and [DONE] follow as usual."""
        if self.state.legacy:  # 0.5.1.post3 raises HTTPException inside the stream: it is cut
            raise RuntimeError(f"HTTPException(status_code=500): {self.request.abort}")
        code, name = ABORT_STATUS
        error = {"object": "error", "message": self.request.abort, "type": name, "param": None}
        return f"data: {json.dumps({'error': {**error, 'code': code}})}\n\n"

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


def _temperature(body: dict) -> float:
    """The request's temperature; OpenAI's (and SGLang's chat API's) default is 1."""
    value = body.get("temperature")
    return float(value) if isinstance(value, int | float) else 1.0
