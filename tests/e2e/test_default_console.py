"""The default sweep's console, as a new user meets it: at most 60 lines (a short banner, one
line per trial, the table, the answer, where the results are), and the transcript README.md
shows is what the sweep prints (the simulator is deterministic: the same trials, rates and
answer; only paths, wall times and the host's own load differ). On the seeds' box speculation
does not pay, and the sweep ends once the model settles that, in a few launches."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from harness.server.procs import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

MAX_LINES = 60
# The launches the default sweep may spend before it settles "speculation off" (screens
# included; the baseline and its re-check besides): what a user waits for before the answer.
MAX_LAUNCHES = 6
TRIAL_LINE = re.compile(r"^\[(\d+/\d+|baseline|baseline re-check)\] ")


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> list[str]:
    tmp = tmp_path_factory.mktemp("results")
    argv = [sys.executable, "sweep.py", "-m", f"tracking.dir={tmp}", f"server.port={free_port()}"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout.splitlines()


def readme_transcript() -> list[str]:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"^\$ make sweep\n(.*?)^```", text, re.M | re.S)
    assert found, "README.md shows the default sweep's console in a block from `$ make sweep`"
    return found.group(1).splitlines()


def comparable(lines: list[str]) -> list[str]:
    """What two runs of the default sweep print alike: the trial lines without their wall
    seconds, the Best and Deploy lines."""
    said = ("Best:", "Deploy:")
    kept = [line for line in lines if TRIAL_LINE.match(line) or line.startswith(said)]
    return [re.sub(r"\s+\(\d+s\)$", "", line) for line in kept]


def test_the_default_sweep_prints_at_most_sixty_lines(printed):
    host_load = [line for line in printed if "host load" in line]  # preflight on a busy host
    assert len(printed) - len(host_load) <= MAX_LINES, "\n".join(printed)
    trials = [line for line in printed if re.match(r"^\[\d+/12\] trial_\d{4}  ", line)]
    assert 1 <= len(trials) <= MAX_LAUNCHES, "\n".join(printed)  # one line each
    assert all(re.search(r"  (ok|pruned|oom|crash|duplicate)\b", line) for line in trials)
    assert not any("start-up:" in line or re.search(r"\brun \d+/\d+:", line) for line in printed)
    assert sum(line.startswith("Deploy:") for line in printed) == 1
    seconds = [line for line in printed if "simulated s" in line]
    assert not seconds, seconds  # one unit of time per line: wall seconds only


def test_the_default_sweep_stops_once_speculation_off_is_settled(printed):
    """The best trial trails the baseline beyond its interval and the model's bands sit below
    the baseline: the sweep stops, says which rule fired, and answers as 12 launches did."""
    launched = [line for line in printed if re.match(r"^\[\d+/12\] trial_\d{4}  ", line)]
    assert len(launched) <= MAX_LAUNCHES, "\n".join(printed)
    stop = [line for line in printed if line.startswith("model: speculation off is settled:")]
    assert len(stop) == 1, "\n".join(printed)
    assert "configurations ruled out; the sweep stops here" in stop[0]
    assert "of search.n_trials' starts unspent" in stop[0]
    deploy = [line for line in printed if line.startswith("Deploy:")]
    assert deploy[0].startswith("Deploy: speculation off: no configuration beats the baseline")
    banner = [line for line in printed if "+ baseline" in line]
    assert banner[0].startswith("up to 12 trials + baseline (the model ends the search once")


def test_readme_shows_what_the_default_sweep_prints(printed):
    shown = readme_transcript()
    assert len(shown) <= MAX_LINES
    assert comparable(shown) == comparable(printed)
