"""An engine program that is not a Python (docker run, srun, a wrapper script) is checked through
engine.probe, or preflight says why it could not check and the sweep carries on; and a hint's
`[sglang]` extra survives the console's markup."""

from __future__ import annotations

import io

from omegaconf import OmegaConf
from rich.console import Console

from sweep.preflight.check import Check, render
from sweep.preflight.machine import check_engine
from tests.unit.test_flags import _CURRENT_FLAGS, _fake_engine


def _wrapper(tmp_path) -> str:
    script = tmp_path / "serve.sh"
    script.write_text(
        '#!/bin/bash\nexec docker run --gpus all IMAGE python3 -m sglang.launch_server "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def _engine(program, probe=(), version=None):
    engine = {"name": "sglang", "program": list(program), "probe": list(probe)}
    return OmegaConf.create({"engine": {**engine, "sglang_version": version}})


def test_a_wrapper_without_a_probe_warns_why_it_could_not_check_and_what_is_assumed(tmp_path):
    for program in ([_wrapper(tmp_path)], ["docker", "run", "--rm", "IMAGE", "python3"]):
        check = check_engine(_engine(program))
        assert check.status == "warn", check
        assert "could not check the SGLang it runs" in check.message
        assert "the 0.5.23 flag set (engine.sglang_version is unset)" in check.message
        assert "engine.probe=" in check.fix
    pinned = check_engine(
        _engine(["srun", "-N1", "python", "-m", "sglang.launch_server"], version="0.5.1")
    )
    assert (
        pinned.status == "warn" and "the 0.5.1 flag set (engine.sglang_version)" in pinned.message
    )


def test_a_probe_reads_the_sglang_inside_the_wrapper(tmp_path):
    probe = _fake_engine(tmp_path, "0.5.22", _CURRENT_FLAGS)
    check = check_engine(_engine([_wrapper(tmp_path)], [probe]))
    assert check.status == "pass", check
    assert (
        "SGLang 0.5.22, 0.5.23 flag set (read from its parser), via engine.probe" in check.message
    )


def test_a_probe_whose_sglang_speaks_the_other_surface_names_the_version_to_set(tmp_path):
    probe = _fake_engine(tmp_path, "0.5.1.post3", ["--model-path", "--cuda-graph-max-bs"])
    check = check_engine(_engine([_wrapper(tmp_path)], [probe]))
    assert check.status == "fail" and check.fix == "set engine.sglang_version=0.5.1"


def test_a_probe_without_sglang_fails_naming_the_probe(tmp_path):
    check = check_engine(_engine([_wrapper(tmp_path)], ["false"]))
    assert check.status == "fail" and "engine.probe (false)" in check.message


def test_hint_extras_survive_rich_markup():
    checks = [
        Check("engine", "fail", "SGLang is not installed for x", "pip install -e '.[sglang]'"),
        Check("gpus", "warn", "cannot inspect [gpus]", "pip install -e '.[gpu]' so ..."),
    ]
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    for line in render(checks):
        console.print(line, soft_wrap=True)
    text = out.getvalue()
    assert "FAIL  engine" in text and "pip install -e '.[sglang]'" in text
    assert "cannot inspect [gpus]" in text and "pip install -e '.[gpu]' so" in text
