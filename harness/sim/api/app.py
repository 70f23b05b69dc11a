"""SGLang's HTTP surface, served by FastAPI as SGLang does (reference/sglang.md §3, §6-7).

One module per concern: `info` (server/model info, health, flush, metrics), `chat`
(/v1/chat/completions), `completions` (/v1/completions), `generate` (/generate); `state` holds
what they share, `streaming` how the last three stream.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from harness.sim.api.chat import add_chat_route
from harness.sim.api.completions import add_completions_route
from harness.sim.api.generate import add_generate_route
from harness.sim.api.info import add_info_routes
from harness.sim.api.state import ServerState

__all__ = ["ServerState", "create_app"]


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI()
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

    add_info_routes(app, state)
    add_chat_route(app, state)
    add_completions_route(app, state)
    add_generate_route(app, state)
    return app
