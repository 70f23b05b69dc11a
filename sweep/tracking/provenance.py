"""What was measured, and on what: written to every trial folder as provenance.json (and so
logged with its artifacts), with the key facts as MLflow tags.

Two measurements of the same configuration on the same machine differ only in `collected_at`.
`software` (what changes performance besides the configuration: the engine's SGLang and torch,
the NVIDIA driver and its CUDA; the simulator's own version) is read once per sweep process and
is part of the setup key (`sweep.config.setup_key`), so an upgrade never reuses old
measurements. Secrets are redacted: any variable whose name looks like a token, key, secret or
password, and the value of --api-key.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import socket
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.server.command import ServerCommand, engine_program
from harness.server.flags import engine_python, installed_sglang_version
from harness.server.gpu import gpu_inventory, gpu_versions
from harness.server.redact import REDACTED, recorded_argv, redact_url_passwords, redacted_env
from harness.sglang.surfaces import (
    ASSUMED_FOR_UNREAD,
    CURRENT,
    RELEASES_READ,
    release_read,
    surface,
)
from harness.workload import source_bytes
from sweep.config.workload import workload_choice
from sweep.paths import ROOT

ENV_PREFIXES = ("NCCL_", "CUDA_", "SGLANG_", "HF_", "PYTORCH_", "TORCH_", "NVIDIA_", "OMP_")
PACKAGES = ("specsweep", "sglang", "torch", "flashinfer-python", "mlflow", "optuna", "hydra-core")
MEASURED_GROUPS = ("engine", "model", "drafter", "hardware", "server", "benchmark")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def _git() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


@functools.cache
def _cuda() -> str | None:
    """torch's CUDA version, read from the `torch/version.py` its build writes (plain literal
    assignments) rather than by importing torch: that import costs ~2.5 s of CPU per sweep
    here, for one string."""
    if _version("torch") is None:
        return None
    spec = importlib.util.find_spec("torch")  # finds the package, runs none of it
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        try:
            tree = ast.parse((Path(folder) / "version.py").read_text())
        except (OSError, SyntaxError):
            continue
        for node in tree.body:  # `cuda = '12.8'` or `cuda: Optional[str] = None`
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets):
                    value = ast.literal_eval(node.value)
                    return value if isinstance(value, str) else None
    import torch  # a layout this does not know: the import, once per process

    return torch.version.cuda


def _engine_torch(python: str) -> str | None:
    """torch's version in the engine's Python, from its metadata (no import: fast)."""
    code = "import importlib.metadata as m; print(m.version('torch'))"
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@functools.cache
def _software(engine: str, program: tuple[str, ...]) -> tuple[tuple[str, str | None], ...]:
    if engine == "sim":
        # The simulator's numbers change with its model, which ships with specsweep.
        return (("simulator", _version("specsweep")),)
    python = engine_python(engine_program(program))
    gpus = gpu_versions()
    return (
        ("sglang", installed_sglang_version(python) if python else None),
        ("torch", _engine_torch(python) if python else None),
        ("driver", gpus["driver"]),
        ("cuda", gpus["cuda"]),
    )


def software(cfg: DictConfig) -> dict[str, str | None]:
    """What changes performance besides the configuration, as the engine will run: SGLang and
    torch in the engine's Python (read without importing them), the NVIDIA driver and the CUDA
    version it supports (NVML); for the simulator, its own version. Read once per process;
    None where it cannot be read (no NVML, a wrapper program that hides the engine's Python)."""
    return dict(_software(str(cfg.engine.name), tuple(cfg.engine.program)))


def software_changes(before: dict[str, Any] | None, now: dict[str, Any]) -> str | None:
    """ "sglang 0.5.22 -> 0.5.23, driver 570.1 -> 575.2", or None when nothing changed."""
    if before is None:
        return "software not recorded"
    changed = [
        f"{key} {before.get(key) or '?'} -> {now.get(key) or '?'}"
        for key in sorted({*before, *now})
        if before.get(key) != now.get(key)
    ]
    return ", ".join(changed) or None


def sglang_release(cfg: DictConfig, installed: str | None) -> dict[str, Any]:
    """Which SGLang release the measurement speaks and whether specsweep read it
    (`harness.sglang.surfaces.RELEASES_READ`): `verified: false` for a version outside them, with
    what was assumed of it. The simulator reproduces a release read, so it is verified."""
    if cfg.engine.name == "sim":
        version = surface(cfg.engine.sglang_version or CURRENT).release
    else:
        version = installed
    verified = release_read(version)
    return {
        "version": version,
        "verified": verified,
        "releases_read": list(RELEASES_READ),
        "assumed": [] if verified else list(ASSUMED_FOR_UNREAD),
    }


def prompts_hash(source: str) -> str:
    return hashlib.sha256(source_bytes(source)).hexdigest()[:16]


def environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    env.update(extra)
    return {k: (REDACTED if v is None else v) for k, v in sorted(redacted_env(env).items())}


def redacted_config(node: Any, key: str = "") -> Any:
    """A config container safe to write down: a secret-named value (hardware.env.HF_TOKEN)
    becomes `${oc.env:NAME}`, read back from the environment when the config is recomposed;
    passwords in URLs are masked. `*_env` keys name variables and are kept."""
    if isinstance(node, dict):
        return {k: redacted_config(v, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [redacted_config(v) for v in node]
    if isinstance(node, str):
        if key and not key.endswith("_env") and redacted_env({key: node})[key] is None:
            return "${oc.env:" + key + "}" if key.isidentifier() else REDACTED
        return redact_url_passwords(node)
    return node


def config_yaml(cfg: DictConfig) -> str:
    """config.yaml for a trial folder: the job's resolved config, secrets redacted."""
    task = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    return OmegaConf.to_yaml(
        OmegaConf.create(redacted_config(OmegaConf.to_container(task, resolve=True)))
    )


def measured_config(cfg: DictConfig) -> dict[str, Any]:
    """The config groups that decide what is measured (not where results go or trial names)."""
    return {
        group: redacted_config(OmegaConf.to_container(cfg[group], resolve=True))
        for group in MEASURED_GROUPS
    }


def collect(cfg: DictConfig, command: ServerCommand, simulator: dict[str, Any] | None) -> dict:
    config = measured_config(cfg)
    config_blob = json.dumps(config, sort_keys=True, default=str).encode()
    return {
        "collected_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "specsweep": {"version": _version("specsweep"), **_git()},
        "packages": {name: _version(name) for name in PACKAGES},
        "python": platform.python_version(),
        "cuda": _cuda(),
        "gpus": gpu_inventory(),
        "software": (found := software(cfg)),
        "sglang_release": sglang_release(cfg, found.get("sglang")),
        "engine": cfg.engine.name,
        "simulator": simulator,
        "host": socket.gethostname(),
        "environment": environment(dict(command.env)),
        "argv": recorded_argv(command.argv),
        "config": config,
        "config_hash": hashlib.sha256(config_blob).hexdigest()[:16],
        "prompts_hash": prompts_hash(workload_choice(cfg)[1]),
    }


def tags(provenance: dict[str, Any]) -> dict[str, str]:
    """The facts worth filtering and grouping runs by, as MLflow tags."""
    gpus = provenance["gpus"] or {}
    values = {
        "specsweep.version": provenance["specsweep"]["version"],
        "specsweep.git_commit": provenance["specsweep"]["commit"],
        "specsweep.git_dirty": provenance["specsweep"]["dirty"],
        "specsweep.sglang_version": provenance["packages"]["sglang"],
        "specsweep.torch_version": provenance["packages"]["torch"],
        "specsweep.cuda_version": provenance["cuda"],
        "specsweep.driver_version": gpus.get("driver"),
        "specsweep.gpu": gpus.get("model"),
        "specsweep.gpu_count": gpus.get("count"),
        "specsweep.host": provenance["host"],
        "specsweep.config_hash": provenance["config_hash"],
        "specsweep.prompts_hash": provenance["prompts_hash"],
        "specsweep.sglang_verified": (provenance.get("sglang_release") or {}).get("verified"),
    }
    for key, value in (provenance.get("software") or {}).items():
        values[f"specsweep.software.{key}"] = value
    if provenance["simulator"]:
        values["specsweep.sim_hardware"] = provenance["simulator"].get("hardware")
    return {k: str(v) for k, v in values.items() if v is not None}


def write(cfg: DictConfig, command: ServerCommand, folder: Path) -> dict[str, Any]:
    simulator = None
    if cfg.engine.name == "sim":
        simulator = {
            "clock_scale": cfg.engine.clock_scale,
            "hardware": cfg.hardware.sim_profile,
            "target": cfg.model.sim_profile,
            "drafter": cfg.drafter.sim_profile if cfg.drafter.path else None,
        }
    provenance = collect(cfg, command, simulator)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "provenance.json").write_text(json.dumps(provenance, indent=2, default=str) + "\n")
    return provenance


def add_startup(folder: Path, phases: dict[str, float], marks: list[dict[str, Any]]) -> None:
    """The launch's start-up beside what it ran on: the server's own durations by phase
    (SGLang's startup_time, server clock) and the phases as the harness saw them begin (wall
    seconds from launch; a stalled start's last phase is its last mark)."""
    path = folder / "provenance.json"
    if not path.is_file():
        return
    record = json.loads(path.read_text())
    record["startup"] = {"phases": phases, "marks": marks}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, default=str) + "\n")
    tmp.replace(path)


def read_tags(folder: Path) -> dict[str, str]:
    path = folder / "provenance.json"
    return tags(json.loads(path.read_text())) if path.is_file() else {}
