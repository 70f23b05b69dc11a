"""Secrets stay out of everything recorded: commands, pid files, configs, environments, logs."""

from __future__ import annotations

import shlex

from harness.server.command import ServerCommand, build_server_command
from harness.server.redact import (
    recorded_argv,
    recorded_shell,
    redact_text,
    redacted_env,
    secret_values,
)
from harness.spec import EngineSpec, ServerSpec
from sweep.tracking.provenance import environment, redacted_config

KEY = "sk-live-0123456789"
DB = "postgresql://sweeper:hunter2pass@db.internal:5432/specsweep"


def command() -> ServerCommand:
    return ServerCommand(
        argv=("python", "-m", "sglang.launch_server", "--model-path", "m", "--api-key", KEY),
        env={"HF_TOKEN": "hf_abcdef123", "NCCL_PROTO": "LL", "DATABASE_URL": DB},
        base_url="http://127.0.0.1:30000",
        host="127.0.0.1",
        port=30000,
        headers={"Authorization": f"Bearer {KEY}"},
        secrets=(KEY,),
    )


def test_recorded_argv_references_the_key_from_the_environment():
    argv = recorded_argv(command().argv)
    assert argv[-2:] == ["--api-key", "$SGLANG_API_KEY"]
    assert KEY not in " ".join(argv)
    assert recorded_argv(["x", f"--api-key={KEY}"]) == ["x", "--api-key=<redacted>"]


def test_the_key_travels_on_the_command_not_read_back_from_argv():
    engine = EngineSpec(name="sglang", program=("python", "-m", "sglang.launch_server"))
    cmd = build_server_command(ServerSpec(model_path="m", api_key=KEY), engine)
    assert "--api-key" in cmd.argv and KEY in cmd.argv  # what SGLang needs
    assert cmd.headers == {"Authorization": f"Bearer {KEY}"}  # what every client sends
    assert KEY in secret_values(cmd)  # masked in what the server prints
    plain = build_server_command(ServerSpec(model_path="m"), engine)
    assert plain.headers == {} and secret_values(plain) == []


def test_recorded_shell_reads_every_secret_from_the_environment_at_run_time():
    line = recorded_shell(command())
    for secret in ("hf_abcdef123", KEY, "hunter2pass"):
        assert secret not in line
    words = shlex.split(line)
    assert 'HF_TOKEN="$HF_TOKEN"' in line and "NCCL_PROTO=LL" in words
    assert '"$SGLANG_API_KEY"' in line


def test_database_url_passwords_are_masked_in_text_and_env():
    assert redact_text(f"connecting to {DB}", []) == (
        "connecting to postgresql://sweeper:<redacted>@db.internal:5432/specsweep"
    )
    assert redacted_env({"DATABASE_URL": DB, "OPTUNA_STORAGE": "sqlite:///x.db"}) == {
        "DATABASE_URL": None,
        "OPTUNA_STORAGE": "sqlite:///x.db",
    }
    assert "hunter2pass" not in str(environment({"DATABASE_URL": DB}))


def test_secret_values_mask_what_the_server_prints():
    secrets = secret_values(command())
    assert set(secrets) == {KEY, "hf_abcdef123", "hunter2pass"}
    line = f"server_args=ServerArgs(api_key='{KEY}', model_path='m')"
    assert (
        redact_text(line, secrets) == "server_args=ServerArgs(api_key='<redacted>', model_path='m')"
    )


def test_redacted_config_refers_to_env_and_keeps_variable_names():
    config = {
        "hardware": {"env": {"HF_TOKEN": "hf_abcdef123", "NCCL_PROTO": "LL", "DB_URL": DB}},
        "server": {"api_key_env": "SGLANG_API_KEY", "extra_args": ["--x", DB]},
        "tracking": {"optuna_storage": DB},
    }
    out = redacted_config(config)
    assert out["hardware"]["env"]["HF_TOKEN"] == "${oc.env:HF_TOKEN}"
    assert out["hardware"]["env"]["NCCL_PROTO"] == "LL"
    assert out["hardware"]["env"]["DB_URL"] == "${oc.env:DB_URL}"
    assert out["server"]["api_key_env"] == "SGLANG_API_KEY"
    assert "hunter2pass" not in str(out)
