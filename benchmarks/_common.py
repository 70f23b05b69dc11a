"""What the benchmarks share (not a benchmark: `make bench` runs benchmarks/[!_]*.py).

The small simulator specs and the scratch folder a scenario runs in, with the `experiment=smoke`
preset the e2e tests use too: benchmarks import nothing from tests/.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from harness.record.layout import ResultsLayout
from harness.server.procs import free_port
from harness.sglang.surfaces import CURRENT
from harness.spec import BenchmarkSpec, EngineSpec, ServerSpec, TrialSpec

ROOT = Path(__file__).resolve().parent.parent
STUDY = "kimi-k25-eagle3"  # the scenarios' study, named (a study's name is otherwise derived)
# conf/experiment/smoke.yaml: the smallest complete sweep, into a study of a known name
SMOKE = ("experiment=smoke", f"search.study_name={STUDY}")


def sim_engine(
    clock_scale: float = 200.0, *extra: str, ready_timeout_s: float = 60, version: str = CURRENT
) -> EngineSpec:
    """The simulator as an engine, speaking `version`'s SGLang surface (tests use it too)."""
    return EngineSpec(
        name="sim",
        program=(sys.executable, "-m", "harness.sim"),
        sglang_version=version,
        ready_timeout_s=ready_timeout_s,
        stop_grace_s=10,
        extra_args=("--sim-clock-scale", str(clock_scale), "--sim-sglang-version", version, *extra),
    )


def eagle3(port: int, steps=3, topk=1, draft=4, **overrides) -> ServerSpec:
    """The reference deployment (Kimi-K2.5, TP 8, the seeds' NCCL setting) with EAGLE-3."""
    values = dict(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        port=port,
        trust_remote_code=True,
        reasoning_parser="kimi_k2",
        env=(("NCCL_PROTO", "LL"),),
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/eagle3",
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
    )
    values.update(overrides)
    return ServerSpec(**values)


class Scratch:
    """One scenario's folder, port and marker (in every server's command line, so what a
    scenario leaves running is found by it)."""

    def __init__(self, root: Path, name: str):
        self.dir = root / name
        self.dir.mkdir()
        self.port = free_port()
        self.marker = f"bench-{name}-{self.port}"

    def spec(self, *faults: str, ready_timeout_s: float = 60, server_kw=None, **bench) -> TrialSpec:
        """A one-trial spec on the simulator, with its --sim-fault switches."""
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
            pid_file=ResultsLayout.at(self.dir).server_pid_file(self.port),
        )

    @property
    def results(self) -> Path:
        return self.dir / "results"

    def sweep_argv(self, *overrides: str) -> list[str]:
        """`python sweep.py -m` with the smoke preset into this scenario's results folder."""
        return [
            *(sys.executable, "sweep.py", "-m", f"tracking.dir={self.results}"),
            f"server.port={self.port}",
            *SMOKE,
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


class LedgerNvml:
    """pynvml's calls over the simulator's GPU ledger (harness/sim/shutdown.py): one file per pid
    still charged. A scheduler releases its entry after a ShutdownReq; one killed holds it on."""

    def __init__(self, ledger: Path):
        self.ledger = ledger
        self.nvmlInit = self.nvmlShutdown = lambda: None
        self.nvmlDeviceGetCount = lambda: 1
        self.nvmlDeviceGetHandleByIndex = lambda index: index

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [
            SimpleNamespace(pid=int(e.name), usedGpuMemory=int(e.read_text()) << 20)
            for e in self.ledger.iterdir()
        ]
