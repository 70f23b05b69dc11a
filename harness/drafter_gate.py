"""Drafter checks before a server starts: a broken drafter costs seconds, not a model load.

Runs `drafter.checks` (and the CPU forward pass with `drafter.check=deep`) on the drafter the
trial would launch, when its directory is on this machine, and caches the verdict per checkpoint
(file sizes and times, target config, algorithm, depth) in `cache_dir` (a sweep's is
`<tracking.dir>/drafter-checks/`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from drafter.checkpoint import CheckpointError, TargetConfig
from drafter.checks import check
from drafter.deep import deep_check
from harness.errors import ConfigError
from harness.spec import TrialSpec

CHECK_LEVELS = ("static", "deep", "off")


def _fingerprint(directory: Path) -> list:
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir())


def drafter_problems(
    drafter_path: str | None, model_path: str, algorithm: str, level: str, cache_dir: Path | None
) -> str | None:
    """None if the drafter may launch (or cannot be inspected here); else what is wrong.
    `level` is static, deep or off; without a `cache_dir` nothing is cached."""
    if level not in CHECK_LEVELS:
        return f"drafter.check={level!r}: use one of {', '.join(CHECK_LEVELS)}."
    if level == "off" or not drafter_path or not Path(drafter_path).is_dir():
        return None
    drafter = Path(drafter_path)
    target = Path(model_path) if Path(model_path).is_dir() else None
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
