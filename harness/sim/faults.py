"""Faults on demand, for tests and for `benchmarks/faults.py`: `--sim-fault KIND[=VALUE]`.

Each fault is something a real SGLang server does to a sweep left running overnight:

    crash-after-tokens=N       the scheduler runs out of GPU memory once N tokens have been
                               generated (SGLang's OOM text, then the launcher SIGKILLs itself)
    hang-at-startup            the weight bar stops redrawing at 40% and nothing more is printed
    slow-start=S               start-up takes S more wall seconds than the model says
    stall-request=N            the N-th generation request gets its first token, then no more
    abort-request=N            the N-th generation request is aborted mid-stream, as SGLang 0.5.23
                               aborts one that decode retraction cannot make room for (an error
                               chunk, then usage and [DONE]; /generate: finish_reason "abort")
    die-after-request=N        the server dies right at the end of the N-th generation request:
                               the fatal line, the request's last chunk, then SIGKILL
    refuse-connections         the ready line is printed but the HTTP port accepts nothing
    refuse-connections-after=N after N generation requests the port stops accepting connections
                               (the process stays alive)
    capture-crash              CUDA-graph capture fails with an illegal memory access (not an OOM,
                               though SGLang's wrapper appends its "lower --mem-fraction-static"
                               hint to it too); nothing happens with --disable-cuda-graph
    kv-oom-after-tokens=N      once N tokens have been generated the KV pool has no room: SGLang's
                               "Decode out of memory" ("Prefill out of memory" when a request's
                               first token crosses N), then the scheduler dies
    host-oom-after-tokens=N    once N tokens have been generated the kernel's OOM killer SIGKILLs
                               scheduler 0: the launcher's subprocess watchdog reports exit code
                               -9, then SIGQUIT (0.5.22+ only)
    hybrid-pool-oom            start-up: the hybrid (mamba) state cache does not fit (0.5.22+ only)
    slow-drain=S               the overlap scheduler's last step (after the last response went
                               out, before the scheduler is fully idle) lasts S more wall
                               seconds: a flush sent at once meets SGLang's idle race
    lossy-after-tokens=N       with speculation on, every request's output differs from the
                               greedy one from token N on (a drafter or verify bug that accepts
                               wrong drafts); without speculation nothing changes
    report-version=V           /server_info says "version": V: a release specsweep has not read
                               (harness.sglang.surfaces.RELEASES_READ), speaking this surface
    drop-server-info-field=F   /server_info (and /get_server_info) has no field F, as a release
                               that renamed or dropped it would answer (with report-version: the
                               harness's surface check must name F)

The texts are in harness/sim/failures.py, copied from SGLang's source.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = {
    "crash-after-tokens": int,
    "hang-at-startup": None,
    "slow-start": float,
    "stall-request": int,
    "abort-request": int,
    "die-after-request": int,
    "refuse-connections": None,
    "refuse-connections-after": int,
    "capture-crash": None,
    "kv-oom-after-tokens": int,
    "host-oom-after-tokens": int,
    "hybrid-pool-oom": None,
    "lossy-after-tokens": int,
    "slow-drain": float,
    "report-version": str,
    "drop-server-info-field": str,
}

_NOUN = {int: "an integer", float: "a number", str: "a non-empty text"}


@dataclass(frozen=True)
class Faults:
    crash_after_tokens: int | None = None
    hang_at_startup: bool = False
    slow_start_s: float = 0.0
    stall_request: int | None = None
    abort_request: int | None = None
    die_after_request: int | None = None
    refuse_connections_after: int | None = None  # 0: from the start
    capture_crash: bool = False
    kv_oom_after_tokens: int | None = None
    host_oom_after_tokens: int | None = None
    hybrid_pool_oom: bool = False
    lossy_after_tokens: int | None = None
    slow_drain_s: float = 0.0
    report_version: str | None = None
    drop_server_info_field: str | None = None

    @classmethod
    def parse(cls, specs: list[str] | None) -> Faults:
        values: dict[str, object] = {}
        for spec in specs or []:
            kind, _, raw = spec.partition("=")
            if kind not in KINDS:
                raise ValueError(f"unknown --sim-fault {kind!r}; known: {', '.join(sorted(KINDS))}")
            convert = KINDS[kind]
            if convert is None:
                if raw:
                    raise ValueError(f"--sim-fault {kind} takes no value, got {raw!r}")
                value: object = True
            else:
                try:
                    value = convert(raw)
                except ValueError:
                    raise ValueError(
                        f"--sim-fault {kind}=VALUE needs {_NOUN[convert]}, got {raw!r}"
                    ) from None
                if convert is str and not raw:
                    raise ValueError(f"--sim-fault {kind}=VALUE needs {_NOUN[str]}, got nothing")
                if convert is not str and value < 0:  # type: ignore[operator]
                    raise ValueError(f"--sim-fault {kind} must be >= 0, got {raw}")
            values[kind] = value
        return cls(
            crash_after_tokens=values.get("crash-after-tokens"),  # type: ignore[arg-type]
            hang_at_startup=bool(values.get("hang-at-startup")),
            slow_start_s=float(values.get("slow-start", 0.0)),  # type: ignore[arg-type]
            stall_request=values.get("stall-request"),  # type: ignore[arg-type]
            abort_request=values.get("abort-request"),  # type: ignore[arg-type]
            die_after_request=values.get("die-after-request"),  # type: ignore[arg-type]
            refuse_connections_after=(
                0 if values.get("refuse-connections") else values.get("refuse-connections-after")  # type: ignore[arg-type]
            ),
            capture_crash=bool(values.get("capture-crash")),
            kv_oom_after_tokens=values.get("kv-oom-after-tokens"),  # type: ignore[arg-type]
            host_oom_after_tokens=values.get("host-oom-after-tokens"),  # type: ignore[arg-type]
            hybrid_pool_oom=bool(values.get("hybrid-pool-oom")),
            lossy_after_tokens=values.get("lossy-after-tokens"),  # type: ignore[arg-type]
            slow_drain_s=float(values.get("slow-drain", 0.0)),  # type: ignore[arg-type]
            report_version=values.get("report-version"),  # type: ignore[arg-type]
            drop_server_info_field=values.get("drop-server-info-field"),  # type: ignore[arg-type]
        )

    def given(self, kind: str) -> bool:
        """Was the fault KIND (its --sim-fault name) asked for?"""
        value = getattr(self, kind.replace("-", "_"))
        return value is not None and value is not False

    @property
    def any(self) -> bool:
        return self != Faults()
