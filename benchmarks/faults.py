"""Does a sweep survive what an unattended night throws at it? (simulated)

Runs every fault scenario of docs/reliability.md against the simulator with the real harness or
the real `python sweep.py -m`, and reports per scenario: survived (the expected outcome, a clean
exit or a clear error), orphans (live processes whose command line carries the scenario's unique
marker afterwards), trials_lost (trials started whose result is in neither their folder nor
MLflow/Optuna) and seconds_to_detect (the server's fatal log line, or its death, to the harness
noticing). GPU-memory release needs NVML and a GPU: unit-tested with a fake NVML, not here.

    python benchmarks/faults.py [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

import optuna
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.command import ServerCommand, build_server_command  # noqa: E402
from harness.errors import ServerError  # noqa: E402
from harness.results import Outcome, TrialResult  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.spec import BenchmarkSpec, TrialSpec  # noqa: E402
from harness.trial import SilentReporter, run_trial  # noqa: E402
from sweep.services import launch_mlflow  # noqa: E402
from tests.conftest import eagle3, free_port, processes_mentioning, sim_engine  # noqa: E402
from tests.e2e.test_sweep_cli import SMALL  # noqa: E402  (the e2e tests' small sweep)

STUDY = "kimi-k25-eagle3"


class Ctx:
    """One scenario's scratch folder, port and marker (in every server's command line)."""

    def __init__(self, root: Path, name: str):
        self.dir = root / name
        self.dir.mkdir()
        self.port = free_port()
        self.marker = f"faults-{name}-{self.port}"

    def spec(self, *faults: str, ready_timeout_s: float = 60, server_kw=None, **bench) -> TrialSpec:
        extra = [arg for fault in faults for arg in ("--sim-fault", fault)]
        values = dict(model="m", max_tokens=256, warmup=1, runs=3, requests_per_run=1)
        values.update(bench)
        marker = ("--served-model-name", self.marker)
        server = eagle3(self.port, extra_args=marker, **(server_kw or {}))
        return TrialSpec(
            name="t",
            role="trial",
            number=None,
            engine=sim_engine(200.0, "--sim-load-s", "2", *extra, ready_timeout_s=ready_timeout_s),
            server=server,
            benchmark=BenchmarkSpec(**values),
            pid_file=self.dir / "servers" / f"port-{self.port}.pid",
        )

    def sweep_argv(self, *overrides: str) -> list[str]:
        return [
            sys.executable,
            "sweep.py",
            "-m",
            f"tracking.dir={self.dir / 'results'}",
            f"server.port={self.port}",
            *SMALL,
            f"server.extra_args=['--served-model-name','{self.marker}']",
            *overrides,
        ]

    def sweep(self, *overrides: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.sweep_argv(*overrides), cwd=ROOT, capture_output=True, text=True, timeout=300
        )

    def wait_for(self, path: Path, text: str = "", timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if path.exists() and text in path.read_text(errors="replace"):
                return
            time.sleep(0.05)
        raise TimeoutError(f"{path} never showed {text!r}")

    def accounted(self, mlflow_uri: str | None = None) -> tuple[int, int]:
        """(trials started, trials whose result survives in their folder, MLflow or Optuna)."""
        study_dir = self.dir / "results" / STUDY
        started = [p.parent for p in study_dir.glob("*/server.log")]
        folders = {str(p.parent) for p in study_dir.glob("*/result.json")}
        optuna_failed = set()
        storage = self.dir / "results" / "optuna.db"
        with contextlib.suppress(KeyError):  # no study: nothing started
            study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{storage}")
            optuna_failed = {f"trial_{t.number:04d}" for t in study.trials if t.state.is_finished()}
        if mlflow_uri:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(mlflow_uri)
            experiment = client.get_experiment_by_name(STUDY)
            runs = client.search_runs([experiment.experiment_id])
            logged = {r.data.tags.get("specsweep.folder") for r in runs}
            folders &= logged  # must be in MLflow too
        recorded = [p for p in started if str(p) in folders or p.name in optuna_failed]
        return len(started), len(recorded)


def trial_scenario(expect: Outcome, *faults: str, **kw):
    def run(ctx: Ctx) -> dict:
        spec = ctx.spec(*faults, **kw)
        result = run_trial(spec, ctx.dir / "t")
        ok = result.outcome is expect
        if expect is Outcome.OOM:
            ok = ok and result.detect_s is not None
        if "stall-request=2" in faults:
            ok = ok and "stalled_requests" in result.warnings
        if "crash-after-tokens=600" in faults:
            ok = ok and len(result.runs) >= 1  # partial results kept
        return {
            "survived": ok,
            "started": 1,
            "recorded": int((ctx.dir / "t" / "result.json").is_file()),
            "seconds_to_detect": result.detect_s,
            "note": f"{result.outcome}: {(result.error or 'ok').splitlines()[0][:70]}",
        }

    return run


def killed_from_outside(ctx: Ctx) -> dict:
    killed_at: list[float] = []

    class Killer(SilentReporter):
        def run_done(self, summary, total_runs):
            if summary.run == 1 and not killed_at:
                pid = json.loads(spec.pid_file.read_text())["pid"]
                killed_at.append(time.monotonic())
                os.killpg(pid, signal.SIGKILL)

    spec = ctx.spec(request_timeout_s=600)
    result = run_trial(spec, ctx.dir / "killed", Killer())
    noticed = time.monotonic() - (result.teardown_s or 0)
    after = run_trial(ctx.spec(runs=1), ctx.dir / "next")
    return {
        "survived": result.outcome is Outcome.CRASH and after.outcome is Outcome.OK,
        "started": 2,
        "recorded": sum((ctx.dir / n / "result.json").is_file() for n in ("killed", "next")),
        "seconds_to_detect": max(noticed - killed_at[0], 0.0) if killed_at else None,
        "note": "crash, then the next trial ok",
    }


def half_dead_server(ctx: Ctx) -> dict:
    """The log says the scheduler died; the launcher lingers (the seeds' half-killed server)."""
    code = (
        "import time; print('Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of "
        "memory', flush=True); time.sleep(300)"
    )
    cmd = ServerCommand(
        argv=(sys.executable, "-c", code, ctx.marker),
        env={},
        base_url=f"http://127.0.0.1:{ctx.port}",
        host="127.0.0.1",
        port=ctx.port,
    )
    server = Server(cmd, ctx.dir / "server.log", ready_timeout_s=120, stop_grace_s=1)
    error = None
    with server:
        try:
            server.wait_ready()
        except ServerError as exc:
            error = exc
    return {
        "survived": error is not None,
        "started": 0,
        "recorded": 0,
        "seconds_to_detect": server.detect_s,
        "note": f"{type(error).__name__}; its ready timeout was 120 s",
    }


def port_taken(ctx: Ctx) -> dict:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ctx.port))
        sock.listen()
        proc = ctx.sweep("search.n_trials=1")
    clear = f"127.0.0.1:{ctx.port} is in use by another process" in proc.stdout
    started, recorded = ctx.accounted()
    return {
        "survived": proc.returncode != 0 and clear and started == 0,
        "started": started,
        "recorded": recorded,
        "seconds_to_detect": None,
        "note": "refused before launch: server.port=<port>",
    }


LEFTOVER = """
import json, os, sys
from pathlib import Path
from harness.command import ServerCommand
from harness.server import Server
argv, port, log, pid_file = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
cmd = ServerCommand(tuple(argv), {}, f"http://127.0.0.1:{port}", "127.0.0.1", port)
server = Server(cmd, Path(log), ready_timeout_s=60, pid_file=Path(pid_file))
server.start()
server.wait_ready()
os._exit(0)  # a crashed sweep: no stop, the pid file stays, the server is orphaned
"""


def leftover_server(ctx: Ctx) -> dict:
    spec = ctx.spec(runs=1)
    argv = build_server_command(spec.server, spec.engine).argv
    subprocess.run(
        [
            *(sys.executable, "-c", LEFTOVER, json.dumps(argv), str(ctx.port)),
            *(str(ctx.dir / "leftover.log"), str(spec.pid_file)),
        ],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    was_orphaned = bool(processes_mentioning(ctx.marker))
    result = run_trial(spec, ctx.dir / "t")
    return {
        "survived": result.outcome is Outcome.OK and was_orphaned,
        "started": 1,
        "recorded": int((ctx.dir / "t" / "result.json").is_file()),
        "seconds_to_detect": None,
        "note": "pid file found, leftover stopped, trial ok",
    }


def interrupt(sig: signal.Signals) -> Callable[[Ctx], dict]:
    def run(ctx: Ctx) -> dict:
        proc = subprocess.Popen(
            ctx.sweep_argv("engine.clock_scale=20", "search.baseline=false"),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log = ctx.dir / "results" / STUDY / "trial_0000" / "server.log"
        ctx.wait_for(log, "fired up")
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
        result = TrialResult.read(log.parent)
        uri = f"sqlite:///{ctx.dir / 'results' / 'mlflow.db'}"
        started, recorded = ctx.accounted(uri)
        return {
            "survived": proc.returncode != 0
            and result.outcome is Outcome.INTERRUPTED
            and "interrupted" in out,
            "started": started,
            "recorded": recorded,
            "seconds_to_detect": None,
            "note": "trial interrupted, MLflow run closed",
        }

    return run


def sigkill_resume(ctx: Ctx) -> dict:
    first = subprocess.Popen(
        ctx.sweep_argv("engine.clock_scale=50", "search.remeasure_baseline=false"),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ctx.wait_for(ctx.dir / "results" / STUDY / "trial_0001" / "server.log")
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    proc = ctx.sweep(
        "engine.clock_scale=50", "search.n_trials=2", "search.remeasure_baseline=false"
    )
    started, recorded = ctx.accounted()
    return {
        "survived": proc.returncode == 0
        and "marked failed" in proc.stdout
        and "left behind by an earlier run" in proc.stderr,
        "started": started,
        "recorded": recorded,
        "seconds_to_detect": None,
        "note": "leftover server stopped, RUNNING trial failed, resumed",
    }


def _mlflow_server(db: Path, port: int) -> subprocess.Popen:
    return launch_mlflow(db.parent, f"sqlite:///{db}", port)


def mlflow_down(ctx: Ctx) -> dict:
    db, mlflow_port = ctx.dir / "server.db", free_port()
    server = _mlflow_server(db, mlflow_port)
    try:
        proc = subprocess.Popen(
            ctx.sweep_argv(
                "search.n_trials=2",
                "search.remeasure_baseline=false",
                f"tracking.mlflow_uri=http://127.0.0.1:{mlflow_port}",
            ),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ctx.wait_for(ctx.dir / "results" / STUDY / "trial_0000" / "server.log")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    out, _ = proc.communicate(timeout=300)
    # MLflow is back (the same store on another port); the server owns the artifacts.
    back_port = free_port()
    server = _mlflow_server(db, back_port)
    try:
        sync = subprocess.run(
            [
                *(sys.executable, "-m", "sweep.sync", "--tracking-dir", str(ctx.dir / "results")),
                *("--mlflow-uri", f"http://127.0.0.1:{back_port}"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    started, recorded = ctx.accounted(f"sqlite:///{db}")
    return {
        "survived": proc.returncode == 0 and "stopped answering" in out and sync.returncode == 0,
        "started": started,
        "recorded": recorded,
        "seconds_to_detect": None,
        "note": sync.stdout.strip().splitlines()[-1][:70] if sync.stdout else sync.stderr[-70:],
    }


SCENARIOS: dict[str, Callable[[Ctx], dict]] = {
    "startup_oom": trial_scenario(Outcome.OOM, server_kw={"mem_fraction_static": 0.93}),
    "midbench_oom": trial_scenario(Outcome.OOM, "crash-after-tokens=600", request_timeout_s=600),
    "never_ready": trial_scenario(Outcome.TIMEOUT, "hang-at-startup", ready_timeout_s=3),
    "stalled_request": trial_scenario(Outcome.OK, "stall-request=2", request_timeout_s=3, runs=2),
    "killed_from_outside": killed_from_outside,
    "half_dead_server": half_dead_server,
    "port_taken": port_taken,
    "leftover_server": leftover_server,
    "sigint": interrupt(signal.SIGINT),
    "sigterm": interrupt(signal.SIGTERM),
    "sigkill_then_resume": sigkill_resume,
    "mlflow_down_then_sync": mlflow_down,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/faults.json")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="run these only")
    args = parser.parse_args()
    rows = []
    with TemporaryDirectory(prefix="specsweep-faults-") as tmp:
        for name, scenario in SCENARIOS.items():
            if args.only and name not in args.only:
                continue
            ctx = Ctx(Path(tmp), name)
            started = time.monotonic()
            try:
                row = scenario(ctx)
            except Exception as exc:  # a scenario that breaks the harness did not survive
                row = {"survived": False, "started": 0, "recorded": 0, "seconds_to_detect": None}
                row["note"] = f"{type(exc).__name__}: {exc}"[:70]
            orphans = processes_mentioning(ctx.marker)
            rows.append(
                {
                    "name": name,
                    "survived": bool(row["survived"]) and not orphans,
                    "orphans": len(orphans),
                    "trials_lost": row["started"] - row["recorded"],
                    "seconds_to_detect": row["seconds_to_detect"],
                    "note": row["note"],
                    "wall_s": round(time.monotonic() - started, 1),
                }
            )
            print(f"{name}: {rows[-1]}", flush=True)
    table = Table(title="Fault scenarios against the simulator (SIMULATED server, real harness)")
    for column in ("scenario", "survived", "orphans", "trials lost", "detect s", "note"):
        table.add_column(column, justify="left" if column in ("scenario", "note") else "right")
    for r in rows:
        detect = "-" if r["seconds_to_detect"] is None else f"{r['seconds_to_detect']:.2f}"
        table.add_row(
            r["name"],
            "yes" if r["survived"] else "[red]NO[/red]",
            str(r["orphans"]),
            str(r["trials_lost"]),
            detect,
            r["note"],
        )
    Console(width=max(Console().width, 140)).print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    keys = ("name", "survived", "orphans", "trials_lost", "seconds_to_detect")
    report = {"simulated": True, "scenarios": [{k: r[k] for k in keys} for r in rows]}
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")
    sys.exit(0 if all(r["survived"] for r in rows) else 1)


if __name__ == "__main__":
    main()
