"""Launches the simulator refuses because it does not model them (not because SGLang would).

SGLang runs every launch here; the simulator's capacity model has a page size of 1 (no pool
rounding to whole pages, no per-request waste in a request's last page, no speculative reserve
in pages, prefix hits not cut to page boundaries), so numbers from it for a page above 1 would be
SGLang's at page 1, presented as the asked launch's. Rather than that, it refuses at start-up with
what it does not model and what to change; `sweep.launch.parse_check` asks the same question
before any launch, so a sweep fails there, naming the config key.
"""

from __future__ import annotations

from typing import Any

from harness.sglang.paging import (
    ATTENTION_BACKEND_FIELDS,
    FORCED_PAGE_SIZE,
    PAGE_64_MLA_BACKENDS,
)

_WHAT = (
    "the simulator models a KV pool of page size 1 only (no rounding of the pool to pages, no "
    "per-request page waste, no speculative reserve in pages, no page-aligned prefix hits), so "
    "its numbers would be page 1's; SGLang itself would run this launch"
)
_ELSEWHERE = "or measure it on engine=sglang"


def not_modelled(args: dict[str, Any]) -> str | None:
    """Why the simulator will not run these parsed args (`vars(namespace)`), or None."""
    page = args.get("page_size")
    if page is not None and page > 1:
        return (
            f"simulator: --page-size {page} is not modelled: {_WHAT}. Drop --page-size "
            f"(server.extra_args) or set it to 1, {_ELSEWHERE}."
        )
    for field in ATTENTION_BACKEND_FIELDS:
        backend = args.get(field)
        if backend in PAGE_64_MLA_BACKENDS:
            flag = "--" + field.replace("_", "-")
            return (
                f"simulator: {flag} {backend} is not modelled: SGLang 0.5.23 runs "
                f"{', '.join(PAGE_64_MLA_BACKENDS)} at page size {FORCED_PAGE_SIZE} "
                f"(arg_groups/overrides.py _mla_backend_page_constraints), and {_WHAT}. Drop "
                f"{flag} {backend} (server.extra_args; the simulated GPUs, sm90 and sm120, "
                f"default to page 1), {_ELSEWHERE}."
            )
    return None
