"""One trial, as a recipe: check drafter -> build command -> start -> wait ready -> read effective
args -> warm up -> [flush -> measure run] x N -> aggregate -> lossless check -> record.

`run_trial` reads as those steps, one call each. It needs no Hydra, Optuna or MLflow: a TrialSpec
in, a TrialResult out. The trial folder is the record of truth: command.sh, server.log,
requests.jsonl and result.json are on disk before anything goes to MLflow (the sweep writes
config.yaml and provenance.json beside them), so analysis and resume work even without it. The
server is stopped in every case, and what was measured before a failure is kept.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

import httpx

from harness.drafter_gate import check_drafter
from harness.errors import (
    MachineNotReady,
    ServerCrashed,
    ServerError,
    ServerOOM,
    ServerStartTimeout,
)
from harness.measure import lossless, surface_check
from harness.measure.acceptance import decays
from harness.measure.bench import Benchmark, BenchmarkResult
from harness.measure.client import deadline_error, is_aborted
from harness.measure.client_cpu import client_bound
from harness.measure.clock import ServerClock
from harness.measure.lossless import LosslessOutput
from harness.measure.memory import memory_metrics, pool_tokens
from harness.measure.memory_probe import MemoryProbe
from harness.measure.sim_timing import SimulatorTiming
from harness.measure.steady import equal_length_levels
from harness.measure.step_acceptance import histogram_metrics, launch_steps, merged_levels
from harness.record.results import Outcome, RequestRecord, RunSummary, TrialResult, write_requests
from harness.server.command import ServerCommand, build_server_command
from harness.server.logs import crash_cause
from harness.server.process import FATAL_GRACE_S, Server
from harness.server.procs import wait_until
from harness.server.redact import recorded_argv, recorded_shell
from harness.server.startup import StartupTracker, startup_phases
from harness.sglang.attention import parse_default_line
from harness.spec import TrialSpec

log = logging.getLogger(__name__)
BYPASSED_ACCEPT_LEN = 1.05  # at or below, the drafter contributes (almost) nothing
# What is recorded as effective.<name>: the searched values, then what the server may change on
# its own: /server_info's top-level fields but 0.5.23's decode graph batch (`cuda_graph_config`'s
# decode max_bs; its flag stays as given) and cuda_visible_devices (the GPUs the harness gave).
EFFECTIVE_KEYS = (
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "mem_fraction_static",
    "hicache_size",
    "speculative_algorithm",
    "max_running_requests",
    "cuda_graph_max_bs_decode",
    "cuda_graph_max_bs",
    "disable_overlap_schedule",
    "max_total_num_tokens",
    "tp_size",
    "cuda_visible_devices",
    "attention_backend",  # chosen by SGLang when not given (harness.sglang.attention)
)


class Reporter(Protocol):
    def server_starting(self, spec: TrialSpec) -> None: ...
    def server_phase(self, startup: StartupTracker) -> None: ...  # the start-up phase moved
    def server_ready(self, startup_s: float, effective: dict[str, Any]) -> None: ...
    def run_done(self, summary: RunSummary, total_runs: int) -> None: ...
    def request_done(self, record: RequestRecord, done: int, total: int, tokens: int) -> None: ...


class SilentReporter:
    def server_starting(self, spec: TrialSpec) -> None:
        pass

    def server_phase(self, startup: StartupTracker) -> None:
        pass

    def server_ready(self, startup_s: float, effective: dict[str, Any]) -> None:
        pass

    def run_done(self, summary: RunSummary, total_runs: int) -> None:
        pass

    def request_done(self, record: RequestRecord, done: int, total: int, tokens: int) -> None:
        pass


def effective_params(info: dict[str, Any], gpus: str | None = None) -> dict[str, Any]:
    """EFFECTIVE_KEYS from /server_info (0.5.23 `ServerArgs.resolved_dict()` + scheduler info; 0.5.1
    `asdict(server_args)`), `gpus` as cuda_visible_devices; a request cap SGLang sized itself and
    the decode CUDA graphs' batch sizes from 0.5.23's scheduler `internal_states` (per DP rank)."""
    effective = {k: info[k] for k in EFFECTIVE_KEYS if k in info and k != "cuda_visible_devices"}
    graphs = info.get("cuda_graph_config")
    decode = graphs.get("decode") if isinstance(graphs, dict) else None
    if isinstance(decode, dict) and decode.get("max_bs") is not None:
        effective["cuda_graph_max_bs_decode"] = decode["max_bs"]
    effective |= {"cuda_visible_devices": gpus} if gpus is not None else {}
    state = (info.get("internal_states") or [{}])[0]
    if effective.get("max_running_requests") is None and state:
        effective["max_running_requests"] = state.get("effective_max_running_requests_per_dp")
    if isinstance(captured := state.get("decode_cuda_graph_bs"), list):  # internal_state.py
        effective["decode_cuda_graph_bs"] = [int(b) for b in captured]
    if info.get("enable_hierarchical_cache") is False:
        effective["hicache_size"] = 0
    return effective


def run_trial(spec: TrialSpec, folder: Path, reporter: Reporter | None = None) -> TrialResult:
    """One configuration end to end; the result is also written to `folder`/result.json.

    Raises ConfigError before anything is launched when the drafter or a flag would fail; every
    later failure is the result's outcome (oom, timeout, crash, error), never an exception,
    except an interruption (recorded, then re-raised)."""
    reporter = reporter or SilentReporter()
    check_drafter(spec)  # a broken drafter costs seconds here, a model load later
    command = build_server_command(spec.server, spec.engine)  # pure: argv, env, headers
    result = _open_record(spec, command, folder)  # command.sh now, result.json at the end
    server = _server(spec, command, folder, getattr(reporter, "server_phase", None))
    bench: Benchmark | None = None
    started = time.monotonic()
    try:
        with server:  # start: its own process group, its log in server.log
            reporter.server_starting(spec)
            ready_wall_s = server.wait_ready()  # /health_generate 200, process alive
            clock, info = _read_effective_args(server, result, ready_wall_s)
            _check_surface(spec, server, result, info)  # what the parsers need, all there?
            reporter.server_ready(result.startup_s, result.effective)
            probe = MemoryProbe(server.log_path, command.base_url, dict(command.headers))
            bench = _benchmark(spec, server, clock, reporter, probe, info)
            timing = SimulatorTiming(reads=clock.simulated)  # its lag per run (measure.sim_timing)
            last_run = spec.benchmark.first_run - 1 + spec.benchmark.runs  # "run 6/8" on a relaunch
            with bench:
                bench.warm_up()  # recorded, kept out of the measurements
                for run in bench.schedule():  # repeats: replaced, adaptive, stopped early
                    bench.flush()  # no run reuses another's cache or counters
                    probe.start_run()  # the window's log lines and counters (measure.memory_probe)
                    reporter.run_done(probe.end_run(bench.measure(run)), last_run)
                    timing.after_run(_simulator_info(server) if timing.reads else {})
                _check_after_last_run(server)  # a server that died with the last request
                measured = bench.result()  # aggregate: means and intervals over the runs
                outputs = bench.lossless_outputs()  # greedy, against the baseline's
        _judge(result, measured, spec)
        pools = pool_tokens(result.effective, server.log_text(), probe.counters)
        cap = result.effective.get("max_running_requests")  # the request cap, beside the pool
        result.metrics.update(  # KV pool, usage, hits
            memory_metrics(measured.runs, *pools, cap, spec.benchmark.max_tokens)
        )
        result.warnings += timing.warnings()  # its rates read low: the host's CPU, not the model
        result.metrics.update(timing.metrics())
        _judge_lossless(result, outputs, spec, folder)
    except ServerOOM as exc:
        _fail(result, Outcome.OOM, exc)
    except ServerStartTimeout as exc:
        _fail(result, Outcome.TIMEOUT, exc)
    except ServerCrashed as exc:
        _fail(result, Outcome.CRASH, exc)
        _name_crash_cause(result, server.log_text(), spec.server.speculative)
    except KeyboardInterrupt:
        result.outcome, result.error = Outcome.INTERRUPTED, "interrupted by the user"
        raise
    except MachineNotReady as exc:  # a busy port, held GPUs: not ok, and the sweep stops
        result.outcome = Outcome.ERROR
        result.error = f"{'' if server.proc else 'not launched: '}{exc}"
        raise
    finally:
        _record(result, server, bench, folder, started)
    return result


def _open_record(spec: TrialSpec, command: ServerCommand, folder: Path) -> TrialResult:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "command.sh").write_text("#!/usr/bin/env bash\n" + recorded_shell(command) + "\n")
    return TrialResult(
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


def _server(spec: TrialSpec, command: ServerCommand, folder: Path, on_startup=None) -> Server:
    return Server(
        command,
        folder / "server.log",
        ready_timeout_s=spec.engine.ready_timeout_s,
        stall_timeout_s=spec.engine.stall_timeout_s,
        stop_grace_s=spec.engine.stop_grace_s,
        gpu_release_timeout_s=spec.engine.gpu_release_timeout_s,
        mem_fraction_static=spec.server.mem_fraction_static,
        pid_file=spec.pid_file,
        on_startup=on_startup,
    )


def _read_effective_args(
    server: Server, result: TrialResult, ready_wall_s: float
) -> tuple[ServerClock, dict[str, Any]]:
    """What the server says it runs (it may have changed what was asked), and its clock."""
    info = server.server_info()
    clock = ServerClock.from_server_info(info)
    result.clock_scale = clock.scale
    result.startup_s = clock.seconds(ready_wall_s)
    result.effective = effective_params(info, gpus=result.gpus)
    if result.effective.get("attention_backend") is None:
        # 0.5.1.post3 chooses it in its TP workers and says which only in the log
        chosen = parse_default_line(server.log_text())
        if chosen is not None:
            result.effective["attention_backend"] = chosen
    result.startup_phases = startup_phases(info)  # the server's own, on its clock
    return clock, info


def _check_surface(spec: TrialSpec, server: Server, result: TrialResult, info: dict) -> None:
    """The ready server's /server_info fields, /metrics names and start-up log lines against what
    the harness parses (harness.measure.surface_check): each one missing is named in the result,
    so a release that renamed one is caught at its first trial, not read as zeros."""
    needs = surface_check.needed_at_ready(
        spec.engine.sglang_version,
        speculative=spec.server.speculative,
        hicache=spec.server.hicache_size > 0,
        metrics=spec.server.enable_metrics,
    )
    names = None
    if spec.server.enable_metrics:
        names = surface_check.read_metric_names(
            server.command.base_url, dict(server.command.headers)
        )
    mismatches = surface_check.surface_mismatches(needs, info, names, server.log_text())
    result.surface_mismatches = mismatches
    if mismatches:
        result.warnings.append("sglang_surface_mismatch")
        surface_check.report(mismatches, info.get("version"))


def _benchmark(
    spec: TrialSpec,
    server: Server,
    clock: ServerClock,
    reporter: Reporter,
    probe: MemoryProbe,
    info: dict[str, Any],
) -> Benchmark:
    return Benchmark(
        server.command.base_url,
        spec.benchmark,
        clock,
        speculative=spec.server.speculative,
        on_request=probe.wrap(reporter.request_done),  # the probe marks each completion's offset
        server_log=server.log_path,
        check_server=lambda: server.raise_if_exited(during="the benchmark"),
        early_stop=spec.early_stop,
        headers=dict(server.command.headers),
        steps=launch_steps(spec.server, info),  # the depth it runs, its stream interval
    )


def _simulator_info(server: Server) -> dict[str, Any]:
    """/server_info after a run, for the simulator's lag before the next flush resets it; {}
    when it does not answer (the check after the last run says why)."""
    try:
        return server.server_info()
    except (httpx.HTTPError, ServerError, ValueError):
        return {}


def _check_after_last_run(server: Server) -> dict[str, Any]:
    """Check the server once more before the trial may be ok: the watchdog runs only beside a
    step, and tolerates a live process for FATAL_GRACE_S after a fatal line, so a server that
    died during the last request would otherwise leave an `ok` trial. A round trip to it
    (/server_info asks the scheduler) first; if that fails, the process gets FATAL_GRACE_S to
    exit or to outlive its fatal line, then `raise_if_exited` turns it into ServerOOM or
    ServerCrashed (what was measured is kept). Returns the answer ({} when there was none)."""
    info: dict[str, Any] = {}
    try:
        info = server.server_info()
    except (httpx.HTTPError, ServerError, ValueError):
        wait_until(lambda: server.returncode is not None, deadline_s=FATAL_GRACE_S * 1.5)
    server.raise_if_exited(during="the last run")
    return info


def _judge(result: TrialResult, measured: BenchmarkResult, spec: TrialSpec) -> None:
    """The outcome and warnings the measurements themselves call for."""
    result.metrics, result.runs = measured.metrics, measured.runs
    result.accept_by_window = measured.accept_by_window
    if decays(measured.accept_by_window):  # last window > 25% below the first
        result.warnings.append("acceptance_decays")
    result.step_histograms = measured.step_histograms  # P(>=k) per level, or why not
    result.metrics.update(histogram_metrics(measured.step_histograms))
    if merged_levels(measured.step_histograms):  # the client fell behind: P(>=k) refused there
        result.warnings.append("chunks_merged")
    if measured.stopped_early:
        assert spec.early_stop is not None
        result.outcome = Outcome.PRUNED  # keeps what it measured
        result.error = (
            f"stopped after {len(measured.runs)} runs: its 95% upper bound is below the "
            f"best trial's lower bound ({spec.early_stop.below:.1f})"
        )
    elif "tok_s" not in result.metrics:
        errors = [r.error for r in measured.records if r.error]
        result.outcome = Outcome.ERROR
        result.error = "no request completed" + (f": {errors[0]}" if errors else "")
    measured_errors = [r.error for r in measured.records if r.phase == "measure" and r.error]
    if any(e == deadline_error(spec.benchmark) for e in measured_errors):
        result.warnings.append("stalled_requests")
    if any(is_aborted(e) for e in measured_errors):
        result.warnings.append("aborted_requests")  # its runs were replaced like stalled ones
    if any(r.flushed is False for r in measured.runs):
        result.warnings.append("flush_failed")  # its runs' cache and counters span earlier runs
    accept = result.metrics.get("accept_len")
    if spec.server.speculative and accept is not None and accept <= BYPASSED_ACCEPT_LEN:
        # Every draft rejected: the seeds' EAGLE-vs-EAGLE3 failure, or a broken drafter.
        result.warnings.append("drafter_bypassed")
    if client_bound(measured.runs):
        result.warnings.append("client_bound")  # the client's core, not the server, was the cap
    if levels := equal_length_levels(measured.records):  # its slots ran in waves there
        result.warnings.append("equal_lengths")
        result.metrics.update({f"equal_length_c{c}": float(n) for c, n in levels.items()})


def _judge_lossless(
    result: TrialResult, outputs: list[LosslessOutput], spec: TrialSpec, folder: Path
) -> None:
    """Write this trial's greedy outputs; with the baseline's, record how far each agrees and
    warn `outputs_diverge` when one parts before DIVERGE_BEFORE_TOKENS
    (harness.measure.lossless)."""
    if not outputs:
        return
    lossless.write(folder / lossless.FILE, outputs)
    reference = spec.lossless_reference
    if reference is None or not reference.is_file():
        return
    agreements, metrics, early = lossless.judge(outputs, lossless.read(reference))
    result.lossless = [asdict(a) for a in agreements]
    result.metrics.update(metrics)
    if early:
        result.warnings.append("outputs_diverge")


def _record(
    result: TrialResult, server: Server, bench: Benchmark | None, folder: Path, started: float
) -> None:
    """The server's timings, the requests and the result on disk, whatever happened."""
    result.detect_s = server.detect_s
    if server.proc is not None:  # the phases as the harness saw them arrive (wall, from launch)
        result.startup_marks = [asdict(mark) for mark in server.startup.marks]
    result.teardown_s = server.teardown_s
    result.gpu_release_s = server.gpu_release_s
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
            result.metrics.update(histogram_metrics(result.step_histograms))  # pruned: kept too
    result.metrics.update(result.startup_phases)  # beside the measurements, whatever happened
    result.wall_s = time.monotonic() - started
    result.write(folder)


def _name_crash_cause(result: TrialResult, log_text: str, speculative: bool) -> None:
    """A crash the engine build causes whatever the configuration (harness.server.logs.crash_cause)
    says so: no other speculative setting, fraction or drafter would start."""
    if found := crash_cause(log_text, speculative):
        result.crash_cause, line = found
        result.error = (
            f"{result.error}: this engine build cannot run speculation on this machine ({line}); "
            "not an OOM, not the drafter: any speculative launch fails the same way here"
        )


def _fail(result: TrialResult, outcome: Outcome, exc: Exception) -> None:
    result.outcome = outcome
    result.error = str(exc)
    result.log_excerpt = getattr(exc, "log_excerpt", None)
    result.oom_kind = getattr(exc, "kind", None)
    log.info("trial %s: %s: %s", result.name, outcome, exc)
