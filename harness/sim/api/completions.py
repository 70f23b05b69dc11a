"""OpenAI `/v1/completions` as SGLang 0.5.23 serves it (`entrypoints/openai/serving_completions.py`,
`protocol.py` CompletionRequest / CompletionStreamResponse): raw text (no reasoning parser), one
chunk per verify step, `usage` on the last chunk when `stream_options.include_usage` asks for it.

`prompt` is a string or a list of token ids (SGLang passes them on as `text` or `input_ids`); a
list of several prompts is not simulated (SGLang's `n`/batch path). Defaults are the protocol's:
`max_tokens` 16, `temperature` 1.0, `model` "default".
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from harness.sim.api import streaming
from harness.sim.api.state import ServerState, error_response, json_body, reasoning_counted
from harness.sim.request import Chunk, SimRequest
from harness.sim.text import id_text

DEFAULT_MODEL_NAME = "default"  # protocol.py


def prompt_of(value: Any) -> tuple[str, int | None] | None:
    """(prompt text the engine hashes, prompt tokens when given as ids); None: not a prompt."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str | list):
        value = value[0]  # one prompt in a list
    if isinstance(value, str) and value:
        return value, None
    if isinstance(value, list) and value and all(isinstance(i, int) for i in value):
        return " ".join(map(str, value)), len(value)
    return None


def add_completions_route(app: FastAPI, state: ServerState) -> None:
    @app.post("/v1/completions")
    async def completions(http_request: Request) -> Response:
        body = await json_body(http_request)
        if body is None:
            return error_response(400, "request body is not a JSON object")
        prompt = prompt_of(body.get("prompt"))
        if prompt is None:
            # serving_completions.py _validate_request (a batch of prompts: not simulated)
            return error_response(400, "Prompt cannot be empty")
        max_tokens = body.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return error_response(400, f"max_tokens must be a positive integer, got {max_tokens!r}")
        request = state.engine.new_request(
            prompt[0],
            max_tokens,
            ignore_eos=bool(body.get("ignore_eos", False)),
            thinking=True,
            greedy=body.get("temperature", 1.0) == 0,
            prompt_tokens=prompt[1],
        )
        state.admit(request)
        completion = _TextCompletion(state, request, str(body.get("model", DEFAULT_MODEL_NAME)))
        if body.get("stream"):
            return completion.stream(streaming.StreamOptions.of(body))
        return JSONResponse(await completion.whole())


class _TextCompletion:
    def __init__(self, state: ServerState, request: SimRequest, model: str):
        self.state = state
        self.request = request
        self.model = model
        self.id = "cmpl-" + uuid.uuid4().hex  # the rid: _request_id_prefix
        self.created = int(time.time())
        self.continuous_usage = False

    def _text(self, chunk: Chunk) -> str:
        return "".join(id_text(self.request.token(i)) for i in chunk.tokens)

    def usage(self) -> dict[str, Any]:
        """usage_processor.py calculate_token_usage, dumped with exclude_none."""
        r = self.request
        reasoning = min(r.generated, reasoning_counted(self.state, r))
        usage: dict[str, Any] = {
            "prompt_tokens": r.prompt_tokens,
            "total_tokens": r.prompt_tokens + r.generated,
            "completion_tokens": r.generated,
            "reasoning_tokens": reasoning,
        }
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def stream(self, options: streaming.StreamOptions) -> Response:
        self.continuous_usage = options.continuous_usage
        trailer = self._usage_chunk if options.include_usage else None
        return streaming.stream(self.state, self.request, self._event, trailer)

    def _event(self, chunk: Chunk) -> dict[str, Any]:
        if chunk.finish_reason == "abort":  # a status-coded abort: one error chunk, as chat's
            return streaming.error_event(self.request)
        choice = {
            "index": 0,
            "text": self._text(chunk),
            "logprobs": None,
            "finish_reason": chunk.finish_reason,
            "matched_stop": None,
        }
        return {
            **self._envelope([choice]),
            "usage": self.usage() if self.continuous_usage else None,
        }

    def _usage_chunk(self) -> dict[str, Any]:
        # model_dump_json(exclude_none=True): no "usage": null chunks
        return {**self._envelope([]), "usage": self.usage()}

    async def whole(self) -> dict[str, Any]:
        text, finish = [], None
        async for chunk in streaming.chunks(self.request):
            text.append(self._text(chunk))
            finish = chunk.finish_reason
        choice = {
            "index": 0,
            "text": "".join(text),
            "logprobs": None,
            "finish_reason": finish,
            "matched_stop": None,
        }
        return {
            **self._envelope([choice]),
            "usage": self.usage(),
            "metadata": {"weight_version": "default"},  # build_endpoint_weight_version_metadata
        }
