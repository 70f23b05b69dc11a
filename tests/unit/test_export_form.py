"""The export's deploy form (sweep.reproduce.deploy_form): SGLang's command for a simulated
trial, with the configured paths, and the comments an operator must read before deploying."""

from __future__ import annotations

import json
import subprocess

import pytest
from hydra import compose, initialize_config_dir

from harness.errors import ConfigError
from harness.record import labels
from harness.server.command import server_flags
from harness.spec import TrialSpec
from sweep.config.schema import register
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR
from sweep.reproduce.deploy_form import (
    SGLANG_PROGRAM,
    SIM,
    Overrides,
    deploy_form,
    without_sim_flags,
)
from sweep.reproduce.export import Deployment, launch_script, systemd_unit
from sweep.reproduce.remeasure import recorded_values

SPECULATION = [
    "server.speculative_num_steps=3",
    "server.speculative_eagle_topk=1",
    "server.speculative_num_draft_tokens=4",
    "server.mem_fraction_static=0.85",
]


def trial(tmp_path, *overrides: str) -> TrialSpec:
    """A trial as the default study composes it (engine=sim, the shipped drafter's path)."""
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"tracking.dir={tmp_path}", *overrides])
    return build_trial_spec(cfg)


def flag_value(argv, flag):
    return argv[argv.index(flag) + 1]


def test_the_default_form_is_sglangs_command_with_the_same_flags_and_no_sim_flags(tmp_path):
    spec = trial(tmp_path, *SPECULATION, "engine.extra_args=['--sim-fault','slow-start=1']")
    argv = deploy_form(spec).command.argv
    assert argv[:3] == SGLANG_PROGRAM == ("python", "-m", "sglang.launch_server")
    assert not [a for a in argv if a.startswith("--sim-")]
    assert list(argv[3:]) == server_flags(spec.server, spec.engine.sglang_version)
    assert (
        flag_value(argv, "--speculative-draft-model-path")
        == spec.server.speculative_draft_model_path
    )
    assert "slow-start=1" not in argv  # a --sim-* flag's value goes with it


def test_form_sim_keeps_the_simulators_command(tmp_path):
    spec = trial(tmp_path, *SPECULATION)
    deployed = deploy_form(spec, SIM)
    argv = deployed.command.argv
    assert argv[1:3] == ("-m", "harness.sim") and deployed.form == "sim"
    assert flag_value(argv, "--sim-drafter") == "eagle3_37k_ttt5"
    assert list(without_sim_flags(argv[3:], spec.engine.sglang_version)) == list(
        deploy_form(spec).command.argv[3:]
    )
    assert "simulator's command" in deployed.comments()[0]
    assert deployed.warnings == ()  # the simulator opens no checkpoint: nothing to warn about


def test_only_the_simulators_flags_and_their_values_are_stripped():
    args = ["--served-model-name", "m", "--sim-seed", "3", "--sim-fault=hang-at-startup"]
    args += ["--sim-fault", "slow-start=2", "--log-level", "debug"]
    assert without_sim_flags(args, "0.5.23") == ("--served-model-name", "m", "--log-level", "debug")
    with pytest.raises(ConfigError, match=r"engine\.extra_args has --sim-bogus"):
        without_sim_flags(["--sim-bogus", "1"], "0.5.23")


def test_a_placeholder_drafter_path_is_named_with_its_key_and_the_option_that_fixes_it(tmp_path):
    spec = trial(tmp_path, *SPECULATION, "drafter.path=/models/eagle3")
    warnings = deploy_form(spec).warnings
    drafter = [w for w in warnings if w.startswith("drafter.path=/models/eagle3")]
    assert drafter and "does not exist on this machine" in drafter[0]
    assert "--drafter-path" in drafter[0]
    # The shipped model's Hugging Face id: deployable, but nobody chose it in a simulated study.
    model = [w for w in warnings if w.startswith("model.path=moonshotai/Kimi-K2.5")]
    assert model and "conf/model/kimi_k25.yaml" in model[0] and "--model-path" in model[0]
    script = launch_script(deploy_form(spec).command, "d", deploy_form(spec).comments())
    assert "# WARNING: drafter.path=/models/eagle3 does not exist" in script


def test_the_configured_or_given_paths_go_out_and_a_real_one_is_not_warned_about(tmp_path):
    spec = trial(tmp_path, *SPECULATION)
    given = Overrides(model_path=str(tmp_path), drafter_path=str(tmp_path))
    deployed = deploy_form(spec, overrides=given)
    argv = deployed.command.argv
    assert flag_value(argv, "--model-path") == flag_value(argv, "--speculative-draft-model-path")
    assert flag_value(argv, "--model-path") == str(tmp_path) and deployed.warnings == ()
    missing = deploy_form(spec, overrides=Overrides(model_path="/no/such/model")).warnings
    assert missing[0].startswith("--model-path /no/such/model does not exist")


def test_a_loopback_service_says_who_can_reach_it_and_how_to_change_it(tmp_path):
    spec = trial(tmp_path, *SPECULATION)
    deployed = deploy_form(spec)
    unit = systemd_unit(deployed.command, "d", "/etc/x.env", deployed.comments())
    head = unit.split("[Unit]")[0]
    assert "--host 127.0.0.1 --port 30000: loopback, so only clients on this machine" in head
    assert "--host 0.0.0.0" in head and "firewall" in head
    # ExecStart's bare python: systemd looks it up in its own path, not the venv's.
    assert "not your shell's PATH" in head
    opened = deploy_form(spec, overrides=Overrides(host="0.0.0.0", port=8000))
    argv = opened.command.argv
    assert flag_value(argv, "--host") == "0.0.0.0" and flag_value(argv, "--port") == "8000"
    assert "every interface" in " ".join(opened.comments())
    with pytest.raises(ConfigError, match=r"--port 80: server\.port=80 is out of range"):
        deploy_form(spec, overrides=Overrides(port=80))


def test_the_baseline_says_no_speculation_not_steps_none(tmp_path):
    params = {k: "None" for k in ("speculative_num_steps", "effective.speculative_eagle_topk")}
    params |= {"speculative_num_draft_tokens": "None", "mem_fraction_static": "0.85"}
    params |= {"hicache_size": "0"}
    text = labels.config_text(recorded_values(params))
    assert text == "speculation off mem=0.85 hicache=0" and "None" not in text
    spec = trial(tmp_path, "drafter=none", "server.mem_fraction_static=0.85")
    deployed = deploy_form(spec, overrides=Overrides(drafter_path="/d"))
    assert "The baseline: no speculation (SGLang without a drafter)." in deployed.comments()
    assert "--speculative-algorithm" not in deployed.command.argv
    assert any("--drafter-path /d is ignored" in w for w in deployed.warnings)


def test_simulated_numbers_are_said_and_the_deployment_records_its_form(tmp_path):
    spec = trial(tmp_path, *SPECULATION)
    deployed = deploy_form(spec)
    assert any("are SIMULATED" in note for note in deployed.comments())
    path = Deployment("t", "r", "why", None, list(deployed.command.argv), True, deployed.form)
    data = json.loads(path.write(tmp_path / "deployment.json").read_text())
    assert data["form"] == "sglang" and data["argv"][:3] == list(SGLANG_PROGRAM)


def test_a_real_study_exports_its_exact_command_and_has_no_sim_form(tmp_path):
    real = trial(
        tmp_path,
        *SPECULATION,
        "engine=sglang",
        "engine.sglang_version=0.5.23",
        f"model.path={tmp_path}",
        f"drafter.path={tmp_path}",
    )
    deployed = deploy_form(real)
    assert deployed.command.argv[1:3] == ("-m", "sglang.launch_server")
    assert deployed.comments()[0] == "The trial's exact command (engine=sglang)."
    assert not any("SIMULATED" in note for note in deployed.comments())
    with pytest.raises(ConfigError, match="--form sim: this study ran on SGLang"):
        deploy_form(real, SIM)


def test_a_path_with_a_newline_stays_inside_its_comment(tmp_path):
    spec = trial(tmp_path, *SPECULATION)
    bad = f"/no/such\ntouch {tmp_path}/pwned"
    deployed = deploy_form(spec, overrides=Overrides(drafter_path=bad))
    script = launch_script(deployed.command, "d", deployed.comments())
    comments = script.split("set -euo pipefail")[0].splitlines()[1:]
    assert all(line.startswith("#") for line in comments)
    path = tmp_path / "launch_server.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    unit = systemd_unit(deployed.command, "d", "/e", deployed.comments())
    assert all(ln.startswith("#") for ln in unit.split("[Unit]")[0].splitlines())
