"""One trial, as a recipe: build -> start -> wait ready -> warm up -> benchmark x N -> record.

The trial folder is the record of truth: config.yaml (written by the job), command.sh,
server.log, requests.jsonl and result.json are on disk before anything goes to MLflow, so
analysis and resume work even without it. The server is stopped in every case.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Protocol

from harness.bench import Benchmark
from harness.clock import ServerClock
from harness.command import build_server_command, recorded_argv, recorded_shell
from harness.errors import ServerCrashed, ServerOOM, ServerStartTimeout
from harness.results import Outcome, RequestRecord, RunSummary, TrialResult, write_requests
from harness.server import Server
from sweep.config import EFFECTIVE_KEYS, TrialSpec

log = logging.getLogger(__name__)
BYPASSED_ACCEPT_LEN = 1.05  # at or below, the drafter contributes (almost) nothing


class Reporter(Protocol):
    def server_starting(self, spec: TrialSpec) -> None: ...
    def server_ready(self, startup_s: float, effective: dict[str, Any]) -> None: ...
    def run_done(self, summary: RunSummary, total_runs: int) -> None: ...
    def request_done(self, record: RequestRecord, done: int, total: int, tokens: int) -> None: ...


class SilentReporter:
    def server_starting(self, spec: TrialSpec) -> None:
        pass

    def server_ready(self, startup_s: float, effective: dict[str, Any]) -> None:
        pass

    def run_done(self, summary: RunSummary, total_runs: int) -> None:
        pass

    def request_done(self, record: RequestRecord, done: int, total: int, tokens: int) -> None:
        pass


def effective_params(info: dict[str, Any]) -> dict[str, Any]:
    effective = {k: info[k] for k in EFFECTIVE_KEYS if k in info}
    if info.get("enable_hierarchical_cache") is False:
        effective["hicache_size"] = 0
    return effective


def run_trial(spec: TrialSpec, folder: Path, reporter: Reporter | None = None) -> TrialResult:
    reporter = reporter or SilentReporter()
    folder.mkdir(parents=True, exist_ok=True)
    command = build_server_command(spec.server, spec.engine)
    (folder / "command.sh").write_text("#!/usr/bin/env bash\n" + recorded_shell(command) + "\n")
    result = TrialResult(
        name=spec.name,
        role=spec.role,
        outcome=Outcome.OK,
        engine=spec.engine.name,
        simulated=spec.engine.simulated,
        clock_scale=1.0,
        params=dict(spec.params),
        command=recorded_argv(command.argv),  # the --api-key value as $SGLANG_API_KEY
        folder=str(folder),
        number=spec.number,
        gpus=command.env.get("CUDA_VISIBLE_DEVICES"),
    )
    started = time.monotonic()
    server = Server(
        command,
        folder / "server.log",
        ready_timeout_s=spec.engine.ready_timeout_s,
        stop_grace_s=spec.engine.stop_grace_s,
        gpu_release_timeout_s=spec.engine.gpu_release_timeout_s,
        mem_fraction_static=spec.server.mem_fraction_static,
        pid_file=spec.pid_file,
    )
    bench: Benchmark | None = None
    try:
        with server:
            reporter.server_starting(spec)
            ready_wall_s = server.wait_ready()
            info = server.server_info()
            clock = ServerClock.from_server_info(info)
            result.clock_scale = clock.scale
            result.startup_s = clock.seconds(ready_wall_s)
            result.effective = effective_params(info)
            reporter.server_ready(result.startup_s, result.effective)
            bench = Benchmark(
                command.base_url,
                spec.benchmark,
                clock,
                speculative=spec.server.speculative,
                on_run=lambda s: reporter.run_done(s, spec.benchmark.runs),
                on_request=reporter.request_done,
                server_log=folder / "server.log",
                check_server=lambda: server.raise_if_exited(during="the benchmark"),
                early_stop=spec.early_stop,
                headers=server.headers,
            )
            measured = bench.run()
            result.metrics, result.runs = measured.metrics, measured.runs
            if measured.stopped_early:
                result.outcome = Outcome.PRUNED  # keeps what it measured
                result.error = (
                    f"stopped after {len(measured.runs)} runs: its 95% upper bound is below the "
                    f"best trial's lower bound ({spec.early_stop.below:.1f})"  # type: ignore[union-attr]
                )
            elif "tok_s" not in result.metrics:
                errors = [r.error for r in measured.records if r.error]
                result.outcome = Outcome.ERROR
                result.error = "no request completed" + (f": {errors[0]}" if errors else "")
        if any(r.incomplete for r in result.runs):
            result.warnings.append("stalled_requests")
        accept = result.metrics.get("accept_len")
        if spec.server.speculative and accept is not None and accept <= BYPASSED_ACCEPT_LEN:
            # Every draft rejected: the seeds' EAGLE-vs-EAGLE3 failure, or a broken drafter.
            result.warnings.append("drafter_bypassed")
    except ServerOOM as exc:
        _fail(result, Outcome.OOM, exc)
    except ServerStartTimeout as exc:
        _fail(result, Outcome.TIMEOUT, exc)
    except ServerCrashed as exc:
        _fail(result, Outcome.CRASH, exc)
    except KeyboardInterrupt:
        result.outcome, result.error = Outcome.INTERRUPTED, "interrupted by the user"
        raise
    finally:
        result.detect_s = server.detect_s
        result.teardown_s = server.teardown_s
        if server.launched_at is not None and server.gone_at is not None:
            result.server_window = [server.launched_at, server.gone_at]
        if server.ready_wall_s is not None:
            result.startup_wall_s = server.ready_wall_s
        elif server.proc is not None and result.outcome is not Outcome.OK:
            result.startup_wall_s = time.monotonic() - started - (server.teardown_s or 0)
        if bench is not None:
            write_requests(folder / "requests.jsonl", bench.records)
            if result.outcome is not Outcome.OK and bench.run_summaries:
                result.runs = bench.run_summaries  # partial results are kept
                result.metrics = bench.metrics()
        result.wall_s = time.monotonic() - started
        result.write(folder)
    return result


def _fail(result: TrialResult, outcome: Outcome, exc: Exception) -> None:
    result.outcome = outcome
    result.error = str(exc)
    result.log_excerpt = getattr(exc, "log_excerpt", None)
    result.oom_kind = getattr(exc, "kind", None)
    log.info("trial %s: %s: %s", result.name, outcome, exc)
