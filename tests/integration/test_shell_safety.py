"""Config strings with shell metacharacters reach the server as argv, verbatim, and never run:
not at launch, not in command.sh, not in the exported launch_server.sh or systemd unit."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import replace

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from harness.server.command import ServerCommand, build_server_command
from harness.server.process import Server
from harness.server.procs import processes_mentioning
from harness.server.redact import recorded_shell
from sweep.config.schema import register
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR
from sweep.reproduce.export import launch_script, systemd_unit
from tests.conftest import sim_engine

# What a program dumps to prove what it received: its argv and the environment variable.
RECORDER = "import json, os, sys; json.dump([sys.argv[1:], os.environ.get('EVIL_ENV')], open(os.environ['OUT'], 'w'))"  # noqa: E501


def nasty(tmp_path) -> list[str]:
    pwned = tmp_path / "pwned"
    return [
        f"; touch {pwned}-semicolon",
        f"$(touch {pwned}-dollar)",
        f"`touch {pwned}-backtick`",
        f"'quoted' \"double\" && touch {pwned}-and",
        f"line\ntouch {pwned}-newline",
        f"| touch {pwned}-pipe > {pwned}-redirect",
    ]


def unit_words(line: str) -> list[str]:
    """systemd's reading of an Exec line (systemd.syntax(7)), for the escapes export uses."""
    words = []
    for quoted, bare in re.findall(r'"((?:[^"\\]|\\.)*)"|(\S+)', line):
        word = bare or re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m[1], m[1]), quoted)
        words.append(word.replace("%%", "%").replace("$$", "$"))
    return words


def spec_from_config(tmp_path, value: str, port: int):
    """The real composition path: every string field that reaches the command holds `value`."""
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"tracking.dir={tmp_path}"])
    cfg.model.path = value
    cfg.model.name = value
    cfg.drafter.path = value
    cfg.search.study_name = value
    cfg.server.port = port
    # the seeds' fraction: SGLang 0.5.23's own default leaves Kimi-K2.5 no KV cache on this box
    cfg.server.mem_fraction_static = 0.85
    cfg.server.extra_args = ["--served-model-name", value]
    with open_dict(cfg):
        cfg.hardware.env["EVIL_ENV"] = value
    return build_trial_spec(cfg)


def command_from_config(tmp_path, value: str, port: int) -> ServerCommand:
    spec = spec_from_config(tmp_path, value, port)
    return build_server_command(spec.server, spec.engine)


@pytest.mark.parametrize("index", range(6))
def test_metacharacters_stay_verbatim_and_inert(tmp_path, port, index, monkeypatch):
    value = nasty(tmp_path)[index]
    command = command_from_config(tmp_path, value, port)
    assert command.argv.count(value) == 3  # model path, drafter path, served model name
    assert command.env["EVIL_ENV"] == value

    # Launched as an argv list: the program receives exactly that, and nothing else ran.
    recorder = replace(command, argv=(sys.executable, "-c", RECORDER, *command.argv[1:]))
    out = tmp_path / "received.json"
    monkeypatch.setenv("OUT", str(out))
    server = Server(recorder, tmp_path / "log", ready_timeout_s=10)
    server.start()
    server.proc.wait(timeout=30)
    server.stop()
    argv, env_value = json.loads(out.read_text())
    assert argv == list(command.argv[1:]) and env_value == value

    # Recorded and exported as shell text: valid bash that round-trips to the same argv/env.
    line = recorded_shell(recorder)
    assert shlex.split(line) == [f"{k}={v}" for k, v in sorted(recorder.env.items())] + list(
        recorder.argv
    )
    script = launch_script(recorder, f"description with {value}")
    unit = systemd_unit(recorder, value, "/etc/specsweep/x.env")
    plain = systemd_unit(replace(recorder, env=dict.fromkeys(recorder.env, "x")), "d", "/e")
    assert len(unit.splitlines()) == len(plain.splitlines())  # no directive injected
    exec_start = next(ln for ln in unit.splitlines() if ln.startswith("ExecStart="))
    assert unit_words(exec_start.removeprefix("ExecStart=")) == list(recorder.argv)
    for name, text in (
        ("command.sh", "#!/usr/bin/env bash\n" + line + "\n"),
        ("launch.sh", script),
    ):
        path = tmp_path / name
        path.write_text(text)
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
        # And run for real: the exported script hands the program the same argv.
        out.unlink()
        subprocess.run(
            ["bash", str(path)], env={"OUT": str(out), "PATH": "/usr/bin:/bin"}, timeout=60
        )
        argv, env_value = json.loads(out.read_text())
        assert argv == list(command.argv[1:]) and env_value == value
    assert list(tmp_path.glob("pwned*")) == []


def test_the_simulator_serves_a_model_whose_name_is_an_injection_attempt(tmp_path, port):
    value = nasty(tmp_path)[1]
    spec = spec_from_config(tmp_path, value, port)
    sim = build_server_command(spec.server, sim_engine(200.0, "--sim-load-s", "2"))
    assert sim.argv.count(value) == 3
    with Server(sim, tmp_path / "server.log", ready_timeout_s=60) as server:
        server.wait_ready()
        assert server.server_info()["served_model_name"] == value
    assert list(tmp_path.glob("pwned*")) == []
    assert processes_mentioning(f"--port {port} ") == []
