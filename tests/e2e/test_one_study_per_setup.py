"""One study, one setup, through the real CLI as a new user meets it: the quickstart, then the
README's own follow-up lines (another box, another drafter, `experiment=quick`, a changed
benchmark value). Each lands in a study of its own, named from its setup; a name given with
search.study_name whose study measured another setup is refused, naming each key; and no table,
summary or baseline of one study holds a trial of another setup."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

# The default composition made fast (the quickstart is 12 trials of 2048 tokens): one trial,
# short answers, a fast simulated clock, no report. These are the study's setup in every run.
QUICK = (
    "search.n_trials=1",
    "benchmark.max_tokens=256",
    "benchmark.runs=2",
    "engine.clock_scale=400",
    "report=false",
)
# The README's everyday lines, each with what the derived study name must read.
FOLLOW_UPS = {
    "hardware=8x_h200": "8x-h200",
    "drafter=kimi_k25_eagle3_10k": "eagle3-10k",
    "experiment=quick": "quick",
    "benchmark.max_tokens=512": "",  # a changed value: the hash alone says it
}
STUDY = re.compile(r"specsweep · study (\S+)")


def specsweep(tmp: Path, port: int, *overrides: str) -> subprocess.CompletedProcess:
    """`specsweep sweep ...` from the checkout, in a shell without the virtualenv on PATH (what
    `make sweep` leaves a user in)."""
    env = {**os.environ, "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    argv = [str(Path(sys.executable).parent / "specsweep"), "sweep"]
    argv += [f"tracking.dir={tmp}", f"server.port={port}", *QUICK, *overrides]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def study_of(proc: subprocess.CompletedProcess) -> str:
    found = STUDY.search(proc.stdout)
    assert found, proc.stdout + proc.stderr
    return found.group(1)


def summary(tmp: Path, study: str) -> dict:
    (path,) = sorted((tmp / study).glob("summary-*.json"))[-1:]
    return json.loads(path.read_text())


def setup_of(folder: str) -> tuple:
    """What a trial folder says it measured besides its searched values."""
    params = json.loads((Path(folder) / "result.json").read_text())["params"]
    return params["hardware"], params["model"], params["max_tokens"]


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """The quickstart, then each follow-up line, into one results folder."""
    tmp, port = tmp_path_factory.mktemp("results"), free_port()
    first = specsweep(tmp, port)
    assert first.returncode == 0, first.stdout + first.stderr
    runs = {"": first}
    for line in FOLLOW_UPS:
        runs[line] = specsweep(tmp, port, line)
        assert runs[line].returncode == 0, runs[line].stdout + runs[line].stderr
    return tmp, port, runs


def test_each_follow_up_line_lands_in_a_study_of_its_own(studies):
    tmp, _, runs = studies
    names = {line: study_of(proc) for line, proc in runs.items()}
    assert len(set(names.values())) == len(names), names  # five setups, five studies
    base = names[""]
    assert base.startswith("kimi-k25-eagle3-")
    for line, word in FOLLOW_UPS.items():
        name = names[line]
        assert name.startswith("kimi-k25-eagle3-") and word in name, (line, name)
        out = runs[line].stdout
        # A new study: its own baseline measured, its own trial, nothing of the quickstart's.
        assert "no trials" not in out and "reusing the study's baseline" not in out, out
        assert "from earlier sweeps" not in out, out
        assert (tmp / name / "setup.json").is_file()
    assert (
        json.loads((tmp / names["hardware=8x_h200"] / "setup.json").read_text())["hardware.name"]
        == "8x-h200"
    )


def test_no_summary_holds_two_setups(studies):
    tmp, _, runs = studies
    for proc in runs.values():
        name = study_of(proc)
        data = summary(tmp, name)
        folders = [t["folder"] for t in data["trials"]] + [data["baseline"]["folder"]]
        hardware = {setup_of(f)[0] for f in folders}
        tokens = {setup_of(f)[2] for f in folders}
        assert len(hardware) == 1 and len(tokens) == 1, (name, hardware, tokens)
        drafters = {json.loads((Path(f) / "result.json").read_text())["params"]["drafter"]
                    for f in (t["folder"] for t in data["trials"])}  # fmt: skip
        assert len(drafters) == 1, (name, drafters)
        assert all(Path(f).parent.name == name for f in folders)  # its own folder only
    h200 = summary(tmp, study_of(runs["hardware=8x_h200"]))
    assert {setup_of(t["folder"])[0] for t in h200["trials"]} == {"8x-h200"}


def test_the_same_command_line_finds_its_study_again(studies):
    tmp, port, runs = studies
    again = specsweep(tmp, port, "hardware=8x_h200")
    assert again.returncode == 0, again.stdout + again.stderr
    assert study_of(again) == study_of(runs["hardware=8x_h200"])
    assert "reusing the study's baseline" in again.stdout
    assert "no trials" in again.stdout  # its one trial is measured already


def test_a_named_study_of_another_setup_is_refused_with_each_key(studies):
    tmp, port, runs = studies
    base = study_of(runs[""])
    before = sorted(p.name for p in (tmp / base).iterdir())
    refused = specsweep(tmp, port, "hardware=8x_h200", f"search.study_name={base}")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    out = " ".join(refused.stdout.split())
    assert f"study '{base}' measured another setup" in out, out
    assert "hardware.name: 8x-rtx-pro-6000 → 8x-h200" in out
    assert "hardware.gpu_memory_gb: 96.0 → 141.0" in out
    assert study_of(runs["hardware=8x_h200"]) in out  # the way out: that setup's own study
    assert "Traceback" not in refused.stdout + refused.stderr
    assert sorted(p.name for p in (tmp / base).iterdir()) == before  # nothing launched


def test_an_explicit_server_value_holds_for_every_server(studies):
    tmp, port, _ = studies
    proc = specsweep(tmp, port, "server.mem_fraction_static=0.9")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "held for every server" in proc.stdout and "mem_fraction_static=0.9" in proc.stdout
    data = summary(tmp, study_of(proc))
    servers = [data["baseline"], data["baseline_recheck"], *data["trials"]]
    fractions = {(s["name"], s["effective"]["mem_fraction_static"]) for s in servers}
    assert {f for _, f in fractions} == {0.9}, fractions
