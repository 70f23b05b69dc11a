"""The exported `python -m sglang.launch_server` command of a simulated study, read by SGLang
0.5.23's own parser (`ServerArgs.add_cli_args`) in the compat environment (`make compat-env`
builds .venv-compat): accepted, every flag read as the trial ran it, and the module it runs
is SGLang's."""

from __future__ import annotations

import os
import subprocess

import pytest
from hydra import compose, initialize_config_dir

from harness.server.flags import parse_with_sglang
from sweep.adaptive.sglang_check import compat_python
from sweep.config.schema import register
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR
from sweep.paths import COMPAT_STUBS
from sweep.reproduce.deploy_form import SGLANG_PROGRAM, Overrides, deploy_form
from sweep.reproduce.measured import Measured

# What a trial on Hopper recorded (sweep.reproduce.measured): pinned as flags in the export.
PINS = Measured("fa3", 48, 48, 0.85, "0.5.23", None, "result.json")

PYTHON = compat_python()
pytestmark = pytest.mark.skipif(
    PYTHON is None, reason="no SGLang environment (.venv-compat): `make compat-env` builds it"
)


def exported_flags(tmp_path, *overrides: str, given: Overrides | None = None) -> list[str]:
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"tracking.dir={tmp_path}", *overrides])
    spec = build_trial_spec(cfg)
    argv = deploy_form(spec, overrides=given or Overrides(), measured=PINS).command.argv
    assert argv[:3] == SGLANG_PROGRAM
    return list(argv[3:])


def test_sglang_parses_the_exported_command_as_the_trial_ran_it(tmp_path):
    flags = exported_flags(
        tmp_path,
        "server.speculative_num_steps=3",
        "server.speculative_eagle_topk=1",
        "server.speculative_num_draft_tokens=4",
        "server.mem_fraction_static=0.85",
        given=Overrides(drafter_path="/models/mine", host="0.0.0.0", port=8000),
    )
    baseline = exported_flags(tmp_path, "drafter=none", "server.mem_fraction_static=0.85")
    speculative, plain = parse_with_sglang(PYTHON, [flags, baseline], extra_path=str(COMPAT_STUBS))
    assert speculative["error"] is None, speculative["error"]
    args = speculative["args"]
    assert args["model_path"] == "moonshotai/Kimi-K2.5" and args["tp_size"] == 8
    assert args["speculative_algorithm"] == "EAGLE3"
    assert args["speculative_draft_model_path"] == "/models/mine"
    assert (args["speculative_num_steps"], args["speculative_eagle_topk"]) == (3, 1)
    assert args["speculative_num_draft_tokens"] == 4 and args["mem_fraction_static"] == 0.85
    assert (args["host"], args["port"]) == ("0.0.0.0", 8000)
    assert args["attention_backend"] == "fa3" and args["max_running_requests"] == 48
    assert args["cuda_graph_max_bs_decode"] == 48
    assert plain["error"] is None and plain["args"]["speculative_algorithm"] is None


def test_the_exported_module_is_sglangs_launch_server():
    found = subprocess.run(
        [PYTHON, "-c", "import importlib.util as u; print(u.find_spec('sglang.launch_server'))"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(COMPAT_STUBS)},  # its GPU-only imports, stubbed
    )
    assert found.returncode == 0 and "sglang/launch_server.py" in found.stdout, found.stderr
