"""Real SGLang 0.5.23 on this CPU: the environment (`make real-sglang-env`, .venv-real) and the
tiny models (`make tiny-models`, .tiny-models) these tests launch, and the stand-in call log.

Under CI (CI=true) a skipped test here is a failure, as in tests/compat: a skip means the
environment or the models were not built, which in CI is a broken pipeline (`.ci/run` builds
both before `make test`). On a developer's machine a skip stays a skip, naming the command.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.skips_in_ci import fail_skip_in_ci

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / ".venv-real"
REAL_PYTHON = REAL / "bin" / "python"
TINY = ROOT / ".tiny-models"
TARGET, DRAFTER = TINY / "target", TINY / "drafter"
# What real SGLang gets on a CPU besides the model (conf/experiment/real_cpu.yaml says why).
CPU_FLAGS = ("--device", "cpu", "--max-total-tokens", "8192", "--sleep-on-idle")
CPU_ENV = (("SGLANG_USE_CPU_ENGINE", "1"),)
STANDIN_ENV = "SPECSWEEP_STANDIN_CALLS"  # tests/real/standins/specsweep_standin.py


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    build = "the real-engine environment and the tiny models (`make real-sglang-env tiny-models`)"
    fail_skip_in_ci(outcome.get_result(), "tests/real", build)


@pytest.fixture(scope="session")
def real_env() -> Path:
    """.venv-real's Python, or a skip naming the command that builds it."""
    if not (REAL / ".installed").is_file():
        pytest.skip("no real-engine environment: run `make real-sglang-env`")
    if not (TINY / ".built").is_file():
        pytest.skip("no tiny models: run `make tiny-models`")
    return REAL_PYTHON


@pytest.fixture
def standin_calls(tmp_path, monkeypatch):
    """The stand-ins' call log for servers launched by this test: a function that reads it."""
    path = tmp_path / "standin-calls.jsonl"
    monkeypatch.setenv(STANDIN_ENV, str(path))

    def read() -> list[str]:
        if not path.is_file():
            return []
        return [json.loads(line)["name"] for line in path.read_text().splitlines() if line]

    return read


def sglang_processes() -> list[str]:
    """Every SGLang process on this machine (the launcher by its module, its children by the
    names SGLang gives them): a test that ends with one left has leaked it."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with_cmd = " ".join(proc.info["cmdline"] or [])
        if "sglang.launch_server" in with_cmd or with_cmd.startswith("sglang::"):
            found.append(f"{proc.info['pid']} {with_cmd[:120]}")
    return found
