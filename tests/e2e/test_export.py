"""An export a deployer can run, from a small simulated sweep through the real CLI: what it was
chosen for, the pins of what the trial's server ran with, the engine it was measured on, a
systemd unit that systemd accepts, and every command it prints run as printed."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from harness.server.procs import free_port, processes_mentioning
from harness.trial import effective_params
from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import sweep

pytestmark = pytest.mark.e2e
STUDY = "kimi-k25-eagle3"
UNIT = f"specsweep-{STUDY}.service"
# The shell a deployer types into: the virtualenv not activated, so a printed `specsweep` must
# be the path to it (sweep.readout.commands).
VENV_BIN = str(Path(sys.executable).parent)
PATH = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != VENV_BIN)
SHELL_ENV = {**os.environ, "PATH": PATH}


def specsweep(*args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(VENV_BIN) / "specsweep"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=SHELL_ENV,
    )


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A single-stream study that also measured 2 in flight, and its export (SGLang's command,
    written by a reproduction with an interpreter and a user for the unit)."""
    results, port = tmp_path_factory.mktemp("results"), free_port()
    proc = sweep(results, port, "search.n_trials=3", "benchmark.concurrency=[1,2]")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    user = getpass.getuser()
    given = ("--runs", "2", "--python", sys.executable, "--user", user)
    export = specsweep("reproduce", "--experiment", STUDY, "--results", str(results), *given)
    assert export.returncode == 0, export.stdout[-3000:] + export.stderr[-3000:]
    (folder,) = (results / "reproduce").iterdir()
    return results, port, folder, export


def test_the_export_says_what_it_was_chosen_for_and_pins_what_was_measured(study):
    results, _, folder, _ = study
    deployment = json.loads((folder / "deployment.json").read_text())
    script = (folder / "launch_server.sh").read_text()
    unit = (folder / UNIT).read_text()
    chosen = deployment["chosen_for"]
    assert chosen["levels"] == [1] and chosen["measured"] == [1, 2]
    assert chosen["load"] == "single-stream decode, one request in flight (concurrency 1 only)"
    assert "--level 2" in chosen["check_other_load"][0]
    for text in (script, unit):
        assert "# Chosen for single-stream decode, one request in flight" in text
    # The pins are the values the chosen trial's server reported, from its result.json.
    trial = results / STUDY / deployment["trial"]
    effective = json.loads((trial / "result.json").read_text())["effective"]
    measured = deployment["measured"]
    assert measured["attention_backend"] == effective["attention_backend"]
    assert measured["max_running_requests"] == effective["max_running_requests"]
    assert measured["cuda_graph_max_bs"] == effective["cuda_graph_max_bs_decode"]
    assert deployment["pinned"] == {
        "--attention-backend": effective["attention_backend"],
        "--max-running-requests": str(effective["max_running_requests"]),
        "--cuda-graph-max-bs-decode": str(effective["cuda_graph_max_bs_decode"]),
    }
    argv = deployment["argv"]
    for flag, value in deployment["pinned"].items():
        assert argv[argv.index(flag) + 1] == value and f"{flag} {value}" in script
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]  # --python
    # The engine it came from: the simulator, and the SGLang release whose flags it spoke.
    assert measured["simulator_version"] and measured["sglang_version"] == "0.5.23"
    assert f"# Measured on {measured['engine']}" in script
    assert subprocess.run(["bash", "-n", str(folder / "launch_server.sh")]).returncode == 0


def test_the_unit_runs_the_given_python_as_the_user_and_waits_for_health(study, tmp_path):
    _, port, folder, _ = study
    unit = (folder / UNIT).read_text()
    lines = unit.splitlines()
    assert f"ExecStart={sys.executable} -m sglang.launch_server" in unit
    assert f"User={getpass.getuser()}" in lines and "Type=exec" in lines
    (probe,) = [ln for ln in lines if ln.startswith("ExecStartPost=")]
    assert "--retry-all-errors" in probe and probe.endswith(f"http://127.0.0.1:{port}/health")
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here: the unit is checked by text above")
    copy = tmp_path / UNIT
    copy.write_text(unit)
    verified = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr
    assert "Unknown" not in verified.stderr and "ignoring" not in verified.stderr


def test_every_command_the_export_prints_runs_as_printed(study):
    _, _, folder, export = study
    deployment = json.loads((folder / "deployment.json").read_text())
    commands = deployment["commands"]
    assert len(commands) >= 3  # another load, another address, the backend left to SGLang
    script = (folder / "launch_server.sh").read_text()
    unit = (folder / UNIT).read_text()
    for purpose, command in commands.items():
        assert "..." not in command and "python -m" not in command
        assert command.startswith(".venv/bin/specsweep "), command  # not on this PATH
        for text in (script, unit, export.stdout):  # whole, on a line of its own, in each
            lines = [line.removeprefix("#").strip() for line in text.splitlines()]
            assert command in lines, f"{purpose}: {command}"
        ran = subprocess.run(
            command,
            shell=True,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
            env=SHELL_ENV,
        )
        assert ran.returncode == 0, f"{command}\n{ran.stdout[-2000:]}{ran.stderr[-2000:]}"
        if "--host 0.0.0.0" in command:
            assert "--host 0.0.0.0 \\" in ran.stdout
        if "--no-attention-pin" in command:
            assert "--attention-backend" not in ran.stdout.split("exec ", 1)[1].split("\n#")[0]
        if "--level 2" in command:
            assert "reproduced:" in ran.stdout


def test_the_exported_simulator_command_resolves_to_what_was_measured(study, tmp_path):
    """The pinned command, launched (--form sim: the simulator's, here on a CPU), reports the
    attention backend, cap and graph batch size the trial recorded."""
    results, port, folder, _ = study
    deployment = json.loads((folder / "deployment.json").read_text())
    printed = specsweep("export", "--experiment", STUDY, "--results", str(results), "--form", "sim")
    assert printed.returncode == 0, printed.stderr
    script = printed.stdout.split("# launch_server.sh\n", 1)[1].split(f"\n# {UNIT}\n")[0]
    path = tmp_path / "launch_server.sh"
    path.write_text(script)
    server = subprocess.Popen(
        ["bash", str(path)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline and status != 200:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code
            except httpx.HTTPError:
                time.sleep(0.2)
        assert status == 200
        info = httpx.get(f"http://127.0.0.1:{port}/server_info").json()
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    assert processes_mentioning(f"--port {port} ") == []
    effective = effective_params(info)
    measured = deployment["measured"]
    assert effective["attention_backend"] == measured["attention_backend"]
    assert effective["max_running_requests"] == measured["max_running_requests"]
    assert effective["cuda_graph_max_bs_decode"] == measured["cuda_graph_max_bs"]
