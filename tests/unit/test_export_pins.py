"""What an export pins and says (sweep.reproduce.measured, load, options, export): the attention
backend, request cap and CUDA-graph batch the trial's server ran with as flags, "not recorded"
where an old trial folder lacks one, the load it was chosen for and a command that checks
another, and a systemd unit that runs an absolute interpreter as a named user and waits for
/health."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest
from hydra import compose, initialize_config_dir

from harness.server.command import ServerCommand
from sweep.config.schema import register
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR
from sweep.readout.commands import program
from sweep.reproduce import measured as measured_mod
from sweep.reproduce import options
from sweep.reproduce.deploy_form import deploy_form
from sweep.reproduce.export import (
    CURL,
    DEFAULT_PYTHON,
    Service,
    launch_script,
    systemd_unit,
)
from sweep.reproduce.load import chosen_for, profile_study
from sweep.reproduce.measured import Measured, read

SPECULATION = [
    "server.speculative_num_steps=3",
    "server.speculative_eagle_topk=4",
    "server.speculative_num_draft_tokens=13",
    "server.mem_fraction_static=0.85",
]
H200 = Measured("fa3", 48, 48, 0.85, "0.5.23", None, "result.json")


def config(tmp_path, *overrides: str):
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=[f"tracking.dir={tmp_path}", *overrides])


def flag_value(argv, flag):
    assert argv.count(flag) == 1, f"{flag} once in {argv}"
    return argv[argv.index(flag) + 1]


# -- pins --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "parser", "graph_flag"),
    [("0.5.23", "kimi_k2", "--cuda-graph-max-bs-decode"), ("0.5.1", "kimi", "--cuda-graph-max-bs")],
)
def test_the_backend_cap_and_graph_batch_the_trial_ran_with_are_pinned(
    tmp_path, version, parser, graph_flag
):
    surface = [f"engine.sglang_version={version}", f"model.reasoning_parser={parser}"]
    spec = build_trial_spec(config(tmp_path, *SPECULATION, *surface))
    deployed = deploy_form(spec, measured=H200)
    argv = deployed.command.argv
    assert flag_value(argv, "--attention-backend") == "fa3"
    assert flag_value(argv, "--max-running-requests") == "48"
    assert flag_value(argv, graph_flag) == "48"  # the flag that version's SGLang has
    assert deployed.pinned == {
        "--attention-backend": "fa3",
        "--max-running-requests": "48",
        graph_flag: "48",
    }
    comments = " ".join(deployed.comments())
    assert "Measured on SGLang 0.5.23" in comments
    assert "Pinned as measured: --attention-backend fa3" in comments


def test_no_attention_pin_leaves_the_backend_to_sglang_and_a_given_one_stays(tmp_path):
    spec = build_trial_spec(config(tmp_path, *SPECULATION))
    unpinned = deploy_form(spec, measured=H200, attention=False)
    assert "--attention-backend" not in unpinned.command.argv
    assert any("left to SGLang (--no-attention-pin)" in p for p in unpinned.pins)
    given = build_trial_spec(
        config(tmp_path, *SPECULATION, "server.extra_args=[--attention-backend,flashinfer]")
    )
    argv = deploy_form(given, measured=H200).command.argv
    assert flag_value(argv, "--attention-backend") == "flashinfer"  # as the launch gave it


def test_an_old_trial_folder_says_not_recorded_and_pins_nothing_it_lacks(tmp_path):
    folder = tmp_path / "trial_0000"
    folder.mkdir()
    # result.json from before the attention backend was recorded; no provenance.json
    effective = {"max_running_requests": 48, "speculative_num_steps": 3}
    (folder / "result.json").write_text(json.dumps({"effective": effective}))
    found = read(folder, {}, {}, "0.5.23")
    assert (found.attention_backend, found.cuda_graph_max_bs, found.sglang) == (None, None, None)
    assert found.max_running_requests == 48
    assert found.engine == "the engine's version not recorded"
    spec = build_trial_spec(config(tmp_path, *SPECULATION))
    deployed = deploy_form(spec, measured=found)
    argv = deployed.command.argv
    assert "--attention-backend" not in argv and "--cuda-graph-max-bs-decode" not in argv
    assert flag_value(argv, "--max-running-requests") == "48"
    pins = " ".join(deployed.pins)
    assert "--attention-backend is not pinned: the trial not recorded" in pins
    assert "--cuda-graph-max-bs-decode is not pinned: not recorded by the trial" in pins


def test_a_moved_folder_is_read_from_the_mlflow_run(tmp_path):
    params = {
        "effective.attention_backend": "triton",
        "effective.max_running_requests": "48",
        "effective.cuda_graph_max_bs_decode": "48",
        "effective.cuda_graph_max_bs": "None",
        "effective.mem_fraction_static": "0.85",
        "mem_fraction_static": "0.9",  # the requested value: not what the server ran
    }
    tags = {"specsweep.software.simulator": "0.1.0"}
    found = read(tmp_path / "gone", params, tags, "0.5.23")
    assert (found.attention_backend, found.max_running_requests) == ("triton", 48)
    assert found.cuda_graph_max_bs == 48 and found.mem_fraction_static == 0.85
    assert found.engine == "the simulator (specsweep 0.1.0, speaking SGLang 0.5.23's flags)"
    assert "MLflow run" in found.source


def test_a_fraction_left_to_sglang_is_pinned_with_the_caps(tmp_path):
    spec = build_trial_spec(config(tmp_path, *SPECULATION))
    spec = replace(spec, server=replace(spec.server, mem_fraction_static=None))
    deployed = deploy_form(spec, measured=replace(H200, mem_fraction_static=0.779))
    assert flag_value(deployed.command.argv, "--mem-fraction-static") == "0.779"
    assert any("caps above change its own choice" in p for p in deployed.pins)


def test_the_engine_text_of_each_provenance(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps({"effective": {}}))
    (folder / "provenance.json").write_text(json.dumps({"software": {"sglang": "0.5.23"}}))
    assert read(folder, {}, {}, None).engine == "SGLang 0.5.23"
    assert measured_mod.NOT_RECORDED in Measured(None, None, None, None, None, None, "").engine


# -- the load it was chosen for ----------------------------------------------------------------


def test_a_single_stream_study_says_so_and_measures_the_profile_of_its_own_setup(tmp_path):
    cfg = config(tmp_path, "hardware=8x_h200", "drafter.path=/models/mine")
    chosen = chosen_for(cfg, None, False)
    assert chosen.levels == (1,) and chosen.others == []
    assert chosen.load == "single-stream decode, one request in flight (concurrency 1 only)"
    assert "No other load was measured" in chosen.note()
    purpose, line = profile_study(cfg, "kimi-k25-eagle3", str(tmp_path))
    assert "1, 8, 32, 64 in flight" in purpose and "Note:" not in purpose
    words = shlex.split(line)
    assert words[:2] == [program("specsweep"), "sweep"] and "..." not in line
    # What it prints composes as printed: the profile, on the study's box, drafter and path.
    profile = config(tmp_path, *words[2:])
    assert profile.search.objective == "weighted_throughput"
    assert list(profile.benchmark.concurrency) == [1, 8, 32, 64]
    assert profile.hardware.name == cfg.hardware.name == "8x-h200"
    assert profile.drafter.path == "/models/mine" and profile.engine.name == "sim"
    # no name given: the sweep derives one from the profile's setup, a study of its own
    assert (
        "search.study_name" not in line and profile.search.study_prefix == "kimi-k25-load-profile"
    )


def test_a_group_that_is_no_conf_file_is_named_in_the_purpose(tmp_path):
    cfg = config(tmp_path, "hardware.name=my-box")
    purpose, line = profile_study(cfg, "s", str(tmp_path))
    assert "the study's hardware (my-box) is not a file of conf/hardware/" in purpose
    assert "hardware=" not in line


@pytest.mark.parametrize(
    ("overrides", "level", "levels", "others", "words"),
    [
        (["benchmark.concurrency=[1,8]"], None, (1,), [8], "single-stream decode"),
        (["benchmark.concurrency=[1,8]"], 8, (8,), [1], "8 requests in flight (concurrency 8"),
        (
            [
                "benchmark.concurrency=[1,32]",
                "search.objective=throughput",
                "search.throughput_concurrency=32",
            ],
            None,
            (32,),
            [1],
            "32 requests in flight",
        ),
        (
            ["benchmark.concurrency=[1,8,64]", "search.objective=weighted_throughput"],
            None,
            (1, 8, 64),
            [],
            "a load profile over 1, 8, 64 requests in flight",
        ),
    ],
)
def test_the_load_each_objective_chooses_for(tmp_path, overrides, level, levels, others, words):
    chosen = chosen_for(config(tmp_path, *overrides), level, False)
    assert (chosen.levels, chosen.others) == (levels, others)
    assert words in chosen.load


# -- the commands it prints --------------------------------------------------------------------


def test_the_same_command_with_an_option_changed(monkeypatch):
    monkeypatch.delenv("SPECSWEEP_MLFLOW_URI", raising=False)
    args = options.parser("d").parse_args(
        ["--experiment", "s", "--results", "/r", "--python", "/opt/v/bin/python", "--runs", "3"]
    )
    line = options.again(args, "export", host="0.0.0.0", port=8000)
    assert line == (
        f"{program('specsweep')} export --experiment s --results /r --host 0.0.0.0 --port 8000 "
        "--python /opt/v/bin/python"
    )
    check = options.again(args, "reproduce", level=8)
    assert check.endswith("--level 8 --python /opt/v/bin/python --runs 3")
    monkeypatch.setenv("SPECSWEEP_MLFLOW_URI", "http://mlflow:5000")
    from_env = options.parser("d").parse_args(["--experiment", "s"])
    assert "--tracking-uri" not in options.again(
        from_env, "export"
    )  # the environment gives it again
    asked = options.parser("d").parse_args(
        ["--experiment", "s", "--tracking-uri", "http://u:pw@h:1"]
    )
    assert "pw" not in options.again(asked, "export")


def command(host: str = "127.0.0.1", argv0: str = "python") -> ServerCommand:
    argv = (argv0, "-m", "sglang.launch_server", "--host", host, "--port", "30000")
    return ServerCommand(argv, {}, f"http://{host}:30000", host, 30000)


def test_commands_are_printed_whole_on_a_line_of_their_own():
    long = "specsweep export " + " ".join(f"--option-{i} value" for i in range(20))
    script = launch_script(command(), "d", ["a note"], [("Do this", long)])
    assert f"#   {long}\n" in script
    broken = launch_script(command(), "d", [], [("Do this", "specsweep export --x 'a\nb'")])
    assert "(not printed: an argument holds a newline)" in broken and "\nb'" not in broken


# -- the systemd unit --------------------------------------------------------------------------


def directive(unit: str, key: str) -> str:
    (line,) = [ln for ln in unit.splitlines() if ln.startswith(key + "=")]
    return line.removeprefix(key + "=")


def test_the_unit_names_a_placeholder_python_and_says_so():
    unit = systemd_unit(command(), "d", "/etc/x.env")
    assert directive(unit, "ExecStart").startswith(f"{DEFAULT_PYTHON} -m sglang.launch_server")
    assert f"WARNING: ExecStart's {DEFAULT_PYTHON} is a placeholder" in unit
    assert directive(unit, "User") == "sglang" and directive(unit, "Type") == "exec"


def test_the_unit_runs_the_given_python_as_the_given_user():
    unit = systemd_unit(command(), "d", "/e", service=Service("/opt/v/bin/python", "llm", 600))
    assert directive(unit, "ExecStart").startswith("/opt/v/bin/python -m sglang.launch_server")
    assert "placeholder" not in unit and directive(unit, "User") == "llm"
    own = systemd_unit(command(argv0="/srv/venv/bin/python"), "d", "/e")
    assert directive(own, "ExecStart").startswith("/srv/venv/bin/python -m")  # as the trial ran
    with pytest.raises(ValueError, match="--python venv/bin/python: give the absolute path"):
        Service("venv/bin/python")


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:30000/health"),
        ("0.0.0.0", "http://127.0.0.1:30000/health"),
        ("::", "http://[::1]:30000/health"),
    ],
)
def test_the_unit_is_started_only_once_health_answers(host, url):
    unit = systemd_unit(command(host), "d", "/e", service=Service(start_timeout_s=2400))
    probe = shlex.split(directive(unit, "ExecStartPost"))
    assert probe[0] == CURL and probe[-1] == url
    assert {"--fail", "--retry-all-errors"} <= set(probe)
    wait = int(probe[probe.index("--retry-max-time") + 1])
    retries, delay = (int(probe[probe.index(f) + 1]) for f in ("--retry", "--retry-delay"))
    assert wait == 2400 and retries * delay >= wait  # retries enough to use the whole wait
    assert int(directive(unit, "TimeoutStartSec")) > wait  # systemd waits longer than curl
