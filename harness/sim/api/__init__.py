"""The simulator's HTTP surface, as SGLang serves it.

app          the FastAPI app and its routes
state        what every endpoint shares: the engine, error bodies, spec fields
chat         OpenAI /v1/chat/completions
completions  OpenAI /v1/completions
generate     SGLang's native /generate
streaming    how the three stream a request as SGLang does: SSE, aborts, usage, [DONE]
info         server and model info, health, cache flush, metrics
prometheus   /metrics: the Prometheus text per surface
"""
