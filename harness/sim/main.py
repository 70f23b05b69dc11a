"""`python -m harness.sim <sglang flags>`: start-up as SGLang does it, then serve.

Start-up prints SGLang's lines in order (load weights, KV pool, CUDA-graph capture, ready) on the
virtual clock, and fails the way SGLang fails: out-of-memory in the scheduler ends with the
launcher SIGKILLing itself (return code -9), a bad flag exits 2, a partial speculative set is a
bare AssertionError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from dataclasses import replace

import uvicorn

from harness.sglang.memory import MULTIMODAL_RESERVE_LINE, weights_leave_no_kv_cache
from harness.sglang.surfaces import CURRENT, LEGACY, READY_LINE, surface
from harness.sim.api.app import ServerState, create_app
from harness.sim.capacity.settings import engine_capacity
from harness.sim.cli import build_parser, reported_args, resolve, sglang_version_of
from harness.sim.cpu_device import speculation_refusal
from harness.sim.engine import Engine, VirtualClock
from harness.sim.failures import (
    HYBRID_POOL_OOM,
    NEEDS_CURRENT,
    capture_crash,
    die_like_sglang,
    runtime_death,
)
from harness.sim.faults import Faults
from harness.sim.loglines import scheduler_summary
from harness.sim.model.perf_model import MemoryPlan, PerfModel
from harness.sim.model.profiles import EAGLE3_37K_TTT5, HARDWARE, TARGETS
from harness.sim.oracle import build_model
from harness.sim.progress import (
    SHARDS_DESC,
    capture_descs,
    capture_graphs,
    draw_bar,
    shard_count,
    startup_time,
)
from harness.sim.shutdown import Scheduler, install_sigterm
from harness.sim.unmodelled import not_modelled

log = logging.getLogger("sglang.launch_server")
sched_log = logging.getLogger("sglang.scheduler")

# SGLang's texts, verbatim (reference/sglang.md §5), per version.
CUDA_GRAPH_OOM_HELP = {
    CURRENT: "\n".join(
        [
            "Possible solutions:",
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
            "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
            "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
            "(Not recommended. Huge performance loss)",
            "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose",
        ]
    ),
    LEGACY: "\n".join(
        [
            "Possible solutions:",
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
            "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
            "3. disable torch compile by not using --enable-torch-compile",
            "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance "
            "loss)",
            "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose",
        ]
    ),
}


def _configure_logging(tp: int, level: str = "info") -> None:
    """SGLang's configure_logger (0.5.23 utils/common.py): the root level is --log-level, so at
    `warning` no INFO line (the "fired up" one included) is printed."""
    fmt = "[%(asctime)s] %(message)s"
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format=fmt,
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stdout,
        force=True,
    )
    # Scheduler lines carry SGLang's rank prefix, e.g. "[2026-01-01 12:00:00 TP0] Decode batch".
    prefix = " TP0" if tp > 1 else ""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        logging.Formatter(f"[%(asctime)s{prefix}] %(message)s", "%Y-%m-%d %H:%M:%S")
    )
    sched_log.addHandler(handler)
    sched_log.propagate = False


def visible_gpus() -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: None when unset (every GPU of the box)."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> None:
    version = sglang_version_of(argv)
    parser = build_parser(version)
    ns = parser.parse_args(argv)
    try:
        faults = Faults.parse(ns.sim_fault)
    except ValueError as exc:
        parser.error(str(exc))  # exit 2, like any bad flag
    if (why_not := not_modelled(vars(ns))) is not None:
        parser.exit(2, f"{why_not}\n")  # not SGLang refusing: the simulator not modelling it
    for kind, why in NEEDS_CURRENT.items():
        if surface(version).legacy and faults.given(kind):
            parser.error(f"--sim-fault {kind} needs the current surface: {why}")
    _configure_logging(ns.tp_size, ns.log_level)
    if faults.any:
        log.warning("simulator: injecting faults %s", faults)
    gpus = visible_gpus()
    if gpus is not None and len(gpus) < ns.tp_size:
        # SGLang's TP ranks pick cuda:<rank>; a rank beyond the visible devices dies at init.
        sched_log.error(
            "Scheduler hit an exception: RuntimeError: CUDA error: invalid device ordinal "
            "(--tp-size %d with CUDA_VISIBLE_DEVICES=%s: %d visible GPU(s))",
            ns.tp_size,
            os.environ["CUDA_VISIBLE_DEVICES"],
            len(gpus),
        )
        sys.exit(1)
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    resolved = resolve(ns, target.architecture, hw.gpu_memory_mib, hw.compute)
    for message in resolved.infos:
        log.info(message)
    for message in resolved.warnings:
        log.warning(message)
    args = resolved.args
    if args["speculative_algorithm"] and not ns.sim_drafter:
        log.warning("simulator: no --sim-drafter given; using the %s profile", EAGLE3_37K_TTT5.name)
    model = build_model(args, ns, os.environ.get("NCCL_PROTO", ""))
    if ns.sim_load_s is not None:
        model.target = replace(model.target, load_s=ns.sim_load_s)
    clock = VirtualClock(ns.sim_clock_scale)
    plan = model.memory_plan(args["mem_fraction_static"]).capped(args["max_total_tokens"])
    log.info("server_args=%s", reported_args(args, version))
    scheduler = Scheduler(plan.static_mib)  # the launcher's child, as SGLang spawns its schedulers
    startup = _start_up(model, plan, args, clock, faults, version, resolved.worker_infos)
    for line in scheduler_summary(model, plan, args, version):
        log.info(line)

    crash_after, on_crash = runtime_death(faults, version, plan.kv_tokens)
    engine = Engine(
        model,
        clock,
        max_running_requests=args["max_running_requests"],
        decode_log_interval=args["decode_log_interval"],
        log_format=version,
        seed=ns.sim_seed,
        drift_sigma=ns.sim_drift,
        crash_after_tokens=crash_after,
        on_crash=on_crash,
        log_forward_iters=_env_bool("SGLANG_LOG_FORWARD_ITERS"),
        drain_extra_s=faults.slow_drain_s,
        **engine_capacity(args, ns, model, plan),
    )
    simulator = {
        "simulated": True,
        "clock_scale": ns.sim_clock_scale,
        "hardware": hw.name,
        "target": target.name,
        "target_architecture": target.architecture,
        "drafter": model.spec.drafter.name if model.spec else None,
        "nccl_tuned": model.dep.nccl_tuned,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "sglang_version": version,
    }
    state = ServerState(
        engine,
        args,
        ["python", "-m", "sglang.launch_server", *sys.argv[1:]],
        plan,
        simulator,
        faults=faults,
        die=die_like_sglang,
        startup_time=startup,
    )
    _serve(state, args["host"], args["port"], scheduler)


def _sleep_virtual(clock: VirtualClock, seconds: float) -> None:
    time.sleep(seconds / clock.scale)


def _start_up(
    model: PerfModel,
    plan: MemoryPlan,
    args: dict,
    clock: VirtualClock,
    faults: Faults,
    version: str,
    worker_infos: list[str] | tuple[str, ...] = (),
) -> dict | None:
    """Print start-up as SGLang does, on the virtual clock; return the durations by phase that
    0.5.23 reports as `startup_time` (None for 0.5.1, which has none). `worker_infos`: what a
    TP worker logs as it sets up, before the weights (0.5.1.post3's attention backend)."""
    gb = plan.gpu_mib / 1024
    for line in worker_infos:
        log.info(line)
    log.info("Load weight begin. avail mem=%.2f GB", gb)
    for handler in logging.getLogger().handlers:
        handler.flush()
    if faults.slow_start_s:
        time.sleep(faults.slow_start_s)
    if plan.failure == "host_oom":
        _sleep_virtual(clock, 5)
        if surface(version).legacy:
            log.error("Rank 0 scheduler is dead. Please check if there are relevant logs.")
            log.error("Exit code: -9")
        else:
            log.error(
                "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If "
                "exit code is -9 (SIGKILL), a common cause is the OS OOM killer."
            )
        log.error(
            "(simulator: the HiCache host pool of %.0f GB across TP ranks exceeds host memory)",
            plan.host_needed_gb,
        )
        sys.exit(1)
    load_s = model.target.load_s * 0.7
    shards = shard_count(plan.weights_mib * args["tp_size"] / 1024)
    # The hang fault: the bar stops redrawing part-way (a stuck filesystem or NCCL init): alive,
    # silent, never ready.
    stop_after = int(shards * 0.4) if faults.hang_at_startup else None
    draw_bar(SHARDS_DESC, shards, load_s, clock.scale, stop_after=stop_after)
    elapsed = "" if surface(version).legacy else f"elapsed={load_s:.2f} s, "
    log.info(
        "Load weight end. %stype=%s, avail mem=%.2f GB, mem usage=%.2f GB.",
        elapsed,
        model.target.architecture,
        gb - plan.weights_mib / 1024,
        plan.weights_mib / 1024,
    )
    if faults.hybrid_pool_oom:
        die_like_sglang(HYBRID_POOL_OOM)
    if (refusal := speculation_refusal(args)) is not None:  # at the KV pools, both models loaded
        die_like_sglang(refusal)
    if model.dep.kv_reserve_mib > 0:  # kv_cache_configurator.py::mm_runtime_reservation_gb
        log.info(MULTIMODAL_RESERVE_LINE, model.dep.kv_reserve_mib / 1024)
    if plan.failure == "no_kv_room" and not surface(version).legacy:
        available = plan.gpu_mib - plan.weights_mib
        die_like_sglang(
            "ValueError: "
            + weights_leave_no_kv_cache(args["mem_fraction_static"], available, plan.gpu_mib)
        )
    if plan.failure in ("kv_pool", "no_kv_room"):
        current = (
            ""
            if surface(version).legacy
            else f" Current value: mem_fraction_static={args['mem_fraction_static']}"
        )
        die_like_sglang(
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
            + current
        )
    kv_s = model.target.load_s * 0.01
    _sleep_virtual(clock, kv_s)
    if plan.pool_note:
        log.warning(plan.pool_note)
    log.info(
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: %d, KV size: %.2f GB",
        plan.kv_tokens,
        plan.kv_pool_mib / 1024,
    )
    log.info("Memory pool end. avail mem=%.2f GB", (plan.gpu_mib - plan.static_mib) / 1024)
    context = args["context_length"] or model.target.context_length
    if plan.kv_tokens < context:
        log.warning(
            "KV pool holds %d tokens, fewer than --context-length %d. Requests longer than the "
            "pool will be rejected. Lower --context-length, raise --mem-fraction-static, or free "
            "memory.",
            plan.kv_tokens,
            context,
        )
    if not model.dep.cuda_graph:
        if plan.failure == "graph_oom":  # no graphs: the first large activation runs out instead
            die_like_sglang("torch.OutOfMemoryError: CUDA out of memory during warm-up prefill.")
        return startup_time(surface(version).legacy, load_s, kv_s, {})
    bs = model.captured  # the sizes the step cost pads to (harness.sglang.graphs), as logged
    avail = (plan.gpu_mib - plan.static_mib) / 1024
    graph_gb = plan.graph_mib / 1024
    graph_s = model.target.load_s * 0.29

    def fail_if_due() -> None:  # after the target graph's bar, before its end line
        if faults.capture_crash:
            capture_crash(CUDA_GRAPH_OOM_HELP[version])
        if plan.failure == "graph_oom":
            short = plan.non_static_mib - (plan.gpu_mib - plan.static_mib)
            die_like_sglang(
                "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate "
                f"{max(short, 64):.0f} MiB. GPU 0 has a total capacity of "
                f"{plan.gpu_mib / 1024:.2f} GiB of which "
                f"{max(plan.gpu_mib - plan.static_mib - 6000, 0):.2f} MiB is free.\n"
                + CUDA_GRAPH_OOM_HELP[version]
            )

    if not surface(version).legacy:
        graphs = capture_graphs(
            model.spec, args, bs, avail, graph_gb, graph_s, clock.scale, fail_if_due
        )
    else:
        log.info("Capture cuda graph begin. This can take up to several minutes.")
        descs = capture_descs(bs, avail, graph_gb)
        draw_bar("", len(bs), graph_s, clock.scale, sglang_format=False, descs=descs)
        fail_if_due()
        graphs = {}
        log.info(
            "Capture cuda graph end. bs=%s, elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB.",
            bs,
            graph_s,
            graph_gb,
            avail - graph_gb,
        )
    return startup_time(surface(version).legacy, load_s, kv_s, graphs)


def _serve(state: ServerState, host: str, port: int, scheduler: Scheduler) -> None:
    app = create_app(state)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    def stop_listening() -> None:
        """The refuse-connections faults: the process lives on, the port accepts nothing."""
        for listener in server.servers:
            listener.close()
        log.warning("simulator: fault injected, no longer accepting connections")

    state.stop_listening = stop_listening

    async def warm_up_then_ready() -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        request = state.engine.new_request("warmup", 8, ignore_eos=True, thinking=False)
        state.engine.submit(request)
        while (await request.queue.get()).finish_reason is None:
            pass
        state.engine.reset_fault_counters()
        if state.faults.refuse_connections_after == 0:
            stop_listening()
        state.status = "Up"
        # The first request installs the tokenizer manager's SIGTERM handler (over uvicorn's).
        install_sigterm(
            scheduler,
            state.surface.legacy,
            lambda: [r.rid for r in state.engine.running],
            state.engine.clock.scale,
        )
        log.info(READY_LINE)

    async def run() -> None:
        engine_task = asyncio.create_task(state.engine.run())
        ready_task = asyncio.create_task(warm_up_then_ready())
        try:
            await server.serve()
        finally:
            for task in (engine_task, ready_task):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        log.info("Gracefully exiting... Remaining number of requests %d", len(state.engine.running))

    log.info("Uvicorn running on http://%s:%d", host, port)
    asyncio.run(run())
    if not server.started:  # the port was taken or the socket failed: SGLang exits non-zero
        sys.exit(1)


if __name__ == "__main__":
    main()


def _env_bool(name: str) -> bool:
    """SGLang's `environ.py::EnvBool.parse`: true/1/yes/y (any case) are true."""
    return os.environ.get(name, "").lower() in ("true", "1", "yes", "y")
