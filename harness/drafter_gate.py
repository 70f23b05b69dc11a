"""Drafter checks before a server starts: a broken drafter costs seconds, not a model load.

Runs `drafter.checks` (and the CPU forward pass with `drafter.check=deep`) on the drafter the
trial would launch, when its files are on this machine (a directory, or a Hugging Face id whose
snapshot is in the local Hugging Face cache: `cached_snapshot`), and caches the verdict per
checkpoint (file sizes and times, target config, algorithm, depth) in `cache_dir` (a sweep's is
`<tracking.dir>/drafter-checks/`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from drafter.checkpoint import CheckpointError, TargetConfig
from drafter.checks import check
from drafter.deep import deep_check, unavailable
from harness.errors import ConfigError
from harness.spec import TrialSpec

CHECK_LEVELS = ("static", "deep", "off")


def hf_cache_root() -> Path:
    """Where the Hugging Face hub caches models (huggingface_hub's rule, no import needed):
    $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def is_hub_id(path: str) -> bool:
    """`org/name` that is not a path on this machine: what SGLang downloads from the hub."""
    return (
        not path.startswith(("/", "./", "../", "~"))
        and path.count("/") == 1
        and not Path(path).exists()
    )


def cached_snapshot(repo_id: str) -> Path | None:
    """The snapshot of `repo_id` the hub would load offline (refs/main names its revision:
    models--{org}--{name}/snapshots/{rev}/), if it holds a config.json; else None."""
    repo = hf_cache_root() / f"models--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / "main"
    if not ref.is_file():
        return None
    snapshot = repo / "snapshots" / ref.read_text().strip()
    return snapshot if (snapshot / "config.json").is_file() else None


def local_checkpoint(path: str | None) -> Path | None:
    """The directory holding `path`'s files on this machine: itself, or a hub id's cached
    snapshot; None when its files are not here."""
    if not path:
        return None
    if Path(path).expanduser().is_dir():
        return Path(path).expanduser()
    return cached_snapshot(path) if is_hub_id(path) else None


def _fingerprint(directory: Path) -> list:
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir())


def drafter_problems(
    drafter_path: str | None, model_path: str, algorithm: str, level: str, cache_dir: Path | None
) -> str | None:
    """None if the drafter may launch (or cannot be inspected here: `local_checkpoint` is None);
    else what is wrong. `level` is static, deep or off; without a `cache_dir` nothing is cached.
    A hub id is checked from its cached snapshot (the target's too)."""
    if level not in CHECK_LEVELS:
        return f"drafter.check={level!r}: use one of {', '.join(CHECK_LEVELS)}."
    if level == "deep" and (missing := unavailable()):
        # before anything is read, and not cached: installing the extra is the whole fix
        return f"drafter.check=deep: {missing}"
    drafter = local_checkpoint(drafter_path)
    if level == "off" or drafter is None:
        return None
    target = local_checkpoint(model_path)
    key = json.dumps(
        [
            str(drafter.resolve()),
            _fingerprint(drafter),
            algorithm.upper(),
            level,
            str(target) if target else None,
            _fingerprint(target) if target else None,
        ]
    )
    name = f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    cached = cache_dir / name if cache_dir is not None else None
    if cached is not None and cached.is_file():
        verdict = json.loads(cached.read_text())
    else:
        report = check(drafter, target, algorithm)
        if level == "deep" and report.ok:
            target_cfg = None
            if target is not None:
                try:
                    target_cfg = TargetConfig.open(target)
                except CheckpointError:
                    target_cfg = None
            report.findings += deep_check(drafter, target_cfg)
        verdict = {"ok": report.ok, "errors": [f.message for f in report.errors]}
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(verdict))
    if verdict["ok"]:
        return None
    return "drafter check failed: " + " | ".join(verdict["errors"])


def check_drafter(spec: TrialSpec) -> None:
    """Raise ConfigError when the trial's drafter would fail; nothing is launched to find out."""
    server = spec.server
    problems = drafter_problems(
        server.speculative_draft_model_path,
        server.model_path,
        server.speculative_algorithm or "EAGLE3",
        spec.drafter_check,
        spec.drafter_cache,
    )
    if problems:
        raise ConfigError(problems)
