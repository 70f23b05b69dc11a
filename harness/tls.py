"""One TLS context per process for every httpx client the harness and the sweep open.

httpx builds a fresh context for each client it creates and loads certifi's CA bundle into it:
50-85 ms of CPU on this machine, more than a concurrency-1 run spends streaming 1,000 tokens
(benchmarks/client_fidelity.py). The harness opens a client per `/server_info`, per `/metrics`
scrape, per benchmark and per health poll; they all trust the same roots, so they share the one
context, built on first use the way httpx builds its default (SSL_CERT_FILE and SSL_CERT_DIR
honoured). An `ssl.SSLContext` is safe to share between connections and threads.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once (pass it as `verify=`)."""
    return httpx.create_ssl_context()
