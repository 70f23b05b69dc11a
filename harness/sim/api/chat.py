"""OpenAI `/v1/chat/completions` as SGLang serves it: one chunk per verify step, reasoning
separated by the reasoning parser, usage and (on request) speculative details at the end."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from harness.sim.api import streaming
from harness.sim.api.state import (
    ServerState,
    error_response,
    json_body,
    reasoning_counted,
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
            return completion.stream(streaming.StreamOptions.of(body))
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
        self.first = True  # the first chunk's delta names the role

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
        reasoning = (
            0 if self.state.legacy else min(self.delivered, reasoning_counted(self.state, r))
        )
        usage: dict[str, Any] = {
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": self.delivered,
            "total_tokens": r.prompt_tokens + self.delivered,
            "reasoning_tokens": reasoning,
        }
        if not self.state.legacy:  # 0.5.23 serializes the unset details as null
            usage |= {"prompt_tokens_details": None, "completion_tokens_details": None}
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def _payload(
        self, choices: list[dict[str, Any]], usage: Any = None, at: float | None = None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.state.served_model_name,
            "choices": choices,
        }
        if usage is not None or self.state.legacy:  # 0.5.23 sends no usage key until it has one
            payload["usage"] = usage
        wanted = self.spec_details and not choices and not self.state.legacy  # not in 0.5.1
        details = spec_meta(self.state, self.request) if wanted else {}
        if details:
            payload["sglext"] = {"spec_tokens_details": details}
        if at is not None:
            payload |= streaming.sim_stamps(self.request, at)
        return payload

    def stream(self, options: streaming.StreamOptions) -> Response:
        self.continuous_usage = options.continuous_usage
        trailer = self._usage_chunk if options.include_usage else None
        return streaming.stream(self.state, self.request, self._event, trailer)

    def _event(self, chunk: Chunk) -> dict[str, Any]:
        if chunk.finish_reason == "abort":  # SGLang 0.5.23 serving_chat.py; 0.5.1.post3 cuts
            if self.state.legacy:
                streaming.cut(self.request)
            return streaming.error_event(self.request)
        delta = self._delta(chunk)
        if not self.state.legacy:  # 0.5.23's delta carries the field, null without reasoning
            delta = {"reasoning_content": None, **delta}
        if self.first:
            delta = {"role": "assistant", **delta}
            self.first = False
        choice = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": chunk.finish_reason,
            "matched_stop": None,
        }
        usage = self.usage() if self.continuous_usage else None
        return self._payload([choice], usage, chunk.at)

    def _usage_chunk(self) -> dict[str, Any]:
        return self._payload([], self.usage())  # with sglext's spec details when asked for

    async def whole(self) -> dict[str, Any]:
        reasoning, content, finish = [], [], None
        async for chunk in streaming.chunks(self.request):
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
