"""What the benchmarks share (not a benchmark: `make bench` runs benchmarks/[!_]*.py).

The small simulator specs and the scratch folder a scenario runs in, with the `experiment=smoke`
preset the e2e tests use too: benchmarks import nothing from tests/. And what every benchmark
does with what it measured: its tables written to docs/results/<benchmark>.md (`write_results`,
with the command, date and machine that measured them), and its `--smoke` form, the whole path in
seconds with its checks enforced, which CI runs (tests/benchmarks) and which writes its outputs to
a temporary folder so the committed full-form files stay what the full form measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from rich.table import Table
from rich.text import Text

from harness.record.layout import ResultsLayout
from harness.server.procs import free_port
from harness.sglang.surfaces import CURRENT
from harness.spec import BenchmarkSpec, EngineSpec, ServerSpec, TrialSpec

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
SMOKE_HELP = (
    "CI's form: the whole path in seconds to a minute or two, exit 1 when a check fails; its "
    "JSON and docs/results table go to a temporary folder"
)
STUDY = "kimi-k25-eagle3"  # the scenarios' study, named (a study's name is otherwise derived)
# conf/experiment/smoke.yaml: the smallest complete sweep, into a study of a known name
SMOKE = ("experiment=smoke", f"search.study_name={STUDY}")
SEEDS_FRACTION = 0.85  # the seeds' --mem-fraction-static (reference/seed-figures.md)


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
        # The seeds' fraction, as the sweep's search space gives every trial: without one the
        # simulator takes SGLang 0.5.23's own default, which leaves Kimi-K2.5 on the seeds' box
        # no KV pool, and every scenario would end in that start-up OOM instead of its fault.
        server_kw = {"mem_fraction_static": SEEDS_FRACTION, **(server_kw or {})}
        server = eagle3(self.port, extra_args=marker, **server_kw)
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


def add_smoke_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)


def output_path(path: Path, smoke: bool) -> Path:
    """Where an output goes: `path`, or in the smoke form the same name in a fresh temporary
    folder (the full form's committed files are only ever written by the full form)."""
    if not smoke:
        return path
    return Path(tempfile.mkdtemp(prefix="specsweep-smoke-")) / path.name


def machine() -> str:
    """The machine, as a results header names it: cores, CPU model, memory, OS, Python."""
    model = "unknown CPU"
    memory = ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = next(
            line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if "model name" in line
        )
        kib = int(Path("/proc/meminfo").read_text().split()[1])  # MemTotal, the first line
        memory = f", {kib / 2**20:.0f} GiB"
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return (
        f"{os.cpu_count()} cores ({model}){memory}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def produced(stem: str) -> dict:
    """What made a run's output, kept in its JSON so a table rendered from it later says so."""
    return {
        "command": shlex.join(["python", f"benchmarks/{stem}.py", *sys.argv[1:]]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
    }


def _cell(value) -> str:
    # rich markup ("[red]NO[/red]") becomes its plain text; a pipe would end the markdown cell
    text = Text.from_markup(value).plain if isinstance(value, str) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(table: Table) -> str:
    """A rich Table (the one the benchmark prints) as a markdown table under its title."""
    headers = [_cell(c.header) for c in table.columns]
    align = ["---:" if c.justify == "right" else "---" for c in table.columns]
    columns = [[_cell(v) for v in c.cells] for c in table.columns]
    lines = [f"### {_cell(table.title)}", ""] if table.title else []
    lines += ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in zip(*columns, strict=True)]
    return "\n".join(lines)


def write_results(
    stem: str,
    tables: list[Table],
    *,
    simulated: bool,
    smoke: bool = False,
    notes: tuple[str, ...] = (),
    made: dict | list[dict] | None = None,
) -> Path:
    """docs/results/<stem>.md: the tables this benchmark measured, under a header with the
    command, date and machine that measured them (`made`: a `produced` record, when the tables
    are rendered from an earlier run's JSON; several, each with the `sets` it gave, when they
    are rendered from several runs), and SIMULATED where the simulator made them."""
    made = made or produced(stem)
    header = [
        f"# {stem}{' (SIMULATED)' if simulated else ''}",
        "",
        f"Written by `benchmarks/{stem}.py`; rerun it to update this file, do not edit it.",
        "",
    ]
    if isinstance(made, dict):
        header += [
            f"- command: `{made['command']}`",
            f"- date: {made['date']}",
            f"- machine: {made['machine']}",
        ]
    else:
        header.append("- runs, each giving the sets named:")
        header += [
            f"  - {', '.join(run['sets'])}: `{run['command']}`, {run['date']}, {run['machine']}"
            for run in made
        ]
    if simulated:
        header.append(
            "- SIMULATED: the servers are the simulator (harness/sim), not SGLang on GPUs; "
            "the harness around them is the real one."
        )
    body = [markdown_table(t) for t in tables]
    text = "\n".join(header) + "\n\n" + "\n\n".join([*notes, *body]) + "\n"
    path = output_path(RESULTS / f"{stem}.md", smoke)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return path


def write_json(path: Path, report: dict, stem: str) -> None:
    """The benchmark's JSON, with what produced it (for `write_results(made=...)` later)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**report, "produced": produced(stem)}, indent=2) + "\n")
    print(f"wrote {path}")
