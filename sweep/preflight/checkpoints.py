"""Preflight checks of the checkpoints: the model and every drafter the search may launch, on
this machine or in the local Hugging Face cache, and the drafter's own checks (docs/drafter.md)."""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness.drafter_gate import cached_snapshot, drafter_problems, hf_cache_root, is_hub_id
from harness.record.layout import ResultsLayout
from sweep.launch.app import CONF_DIR
from sweep.preflight.check import Check
from sweep.preflight.weights import gib
from sweep.study.search.space import SearchSpace


def _drafter_choices(cfg: DictConfig, space: SearchSpace) -> list[str | None]:
    """Drafter paths the sweep may launch: the configured one and any the space selects."""
    paths = [cfg.drafter.path]
    for param in space.params.values():
        if param.key == "drafter":
            conf = Path(CONF_DIR) / "drafter"
            for choice in param.choices:
                file = conf / f"{choice}.yaml"
                if file.is_file():
                    paths.append(OmegaConf.load(file).get("path"))
    return [p for p in dict.fromkeys(paths) if p]


def _size(path: Path) -> str:
    """Everything under `path` (weights, tokenizer, config), in GiB or MiB."""
    return gib(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()))


def _hub_checks(cfg: DictConfig, what: str, path: str) -> list[Check]:
    """A hub id: checked from the local Hugging Face cache when its snapshot is there; otherwise
    say that SGLang downloads it at launch and, for a drafter, that its check could not run."""
    sim = cfg.engine.name == "sim"
    snapshot = cached_snapshot(path)
    if snapshot is not None:
        checks = [
            Check(
                what,
                "pass",
                f"{path}: a hub id, in the local Hugging Face cache "
                f"(revision {snapshot.name[:12]}, {_size(snapshot)})",
            )
        ]
        if what == "drafter":
            checks += _drafter_check(cfg, path)
        return checks
    checks = [
        Check(
            what,
            "pass" if sim else "warn",
            f"{path}: a hub id"
            + (
                ", not loaded by the simulator"
                if sim
                else ", downloaded at launch (needs the network)"
            ),
        )
    ]
    if what == "drafter" and cfg.drafter.check != "off":
        checks.append(
            Check(
                "drafter check",
                "warn",
                f"could not check {path}: not in the local Hugging Face cache ({hf_cache_root()})",
                f"download it first (huggingface-cli download {path}) or set drafter.path to a "
                "local copy, so it is checked before a launch",
            )
        )
    return checks


def _drafter_check(cfg: DictConfig, path: str) -> list[Check]:
    problems = drafter_problems(
        path,
        cfg.model.path,
        cfg.drafter.algorithm,
        "static",
        ResultsLayout.at(cfg.tracking.dir).drafter_checks,
    )
    if not problems:
        return []
    return [Check("drafter check", "fail", problems, "python -m drafter check --drafter ...")]


def check_paths(cfg: DictConfig, space: SearchSpace) -> list[Check]:
    checks = []
    for what, path in [("model", cfg.model.path)] + [
        ("drafter", p) for p in _drafter_choices(cfg, space)
    ]:
        p = Path(path).expanduser()
        # a relative directory that exists is what SGLang loads (.tiny-models/target): no hub id
        local = path.startswith(("/", "./", "../", "~")) or p.is_dir()
        if not local and is_hub_id(path):
            checks += _hub_checks(cfg, what, path)
            continue
        if not local:
            status = "pass" if cfg.engine.name == "sim" else "warn"
            checks.append(
                Check(
                    what,
                    status,
                    f"{path}: a hub id"
                    + (
                        ", not loaded by the simulator"
                        if status == "pass"
                        else ", downloaded at launch (needs the network)"
                    ),
                )
            )
        elif not p.exists():
            status = "pass" if cfg.engine.name == "sim" else "fail"
            checks.append(
                Check(
                    what,
                    status,
                    f"{path}: not on this machine"
                    + (
                        f"; the simulator does not load it, engine=sglang would refuse it "
                        f"(set {what}.path to the checkpoint on the GPU box)"
                        if status == "pass"
                        else ""
                    ),
                    "" if status == "pass" else f"fix {what}.path",
                )
            )
        elif not os.access(p, os.R_OK):
            checks.append(
                Check(what, "fail", f"{path}: not readable", f"fix the permissions of {path}")
            )
        else:
            checks.append(Check(what, "pass", f"{path}: {_size(p)} on disk"))
        if what == "drafter" and p.is_dir():
            checks += _drafter_check(cfg, path)
    return checks
