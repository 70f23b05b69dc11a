"""The study a command line lands in: one study per setup.

`search.study_name` unset (the default), the name is derived from the experiment's prefix
(`search.study_prefix`), a short readable form of what the command line changed (the box, the
drafter, the engine, the experiment: `hardware=8x_h200` reads `8x-h200`) and the setup's hash
(sweep.config.setup_key), so any override that changes what a measurement depends on lands in
a study of its own, and the same command line finds its study again:

    kimi-k25-eagle3-6f0c2a                  the default composition
    kimi-k25-eagle3-8x-h200-1b9d47          hardware=8x_h200
    kimi-k25-eagle3-quick-03e8f5            experiment=quick
    kimi-k25-eagle3-c0d4e1                  benchmark.runs=10 (the hash alone says it)

The objective is in the hash as well: a study keeps one. A name given with `search.study_name` is
taken as it is; a study whose recorded setup differs is
then refused before anything starts (sweep.tracking.identity).

A searched server knob set on a sweep's command line (`server.mem_fraction_static=0.90`) is held
there for every server of the study, the baseline, the trials and the re-checks: it leaves the
search space (`pinned_values`) and joins the setup, so the study is another one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sweep.config.setup_key import digest, setup
from sweep.config.specs import SEARCHED

NAME_KEY = "search.study_name"
# The groups whose choice on the command line reads in the name (the rest only in the hash).
READABLE_GROUPS = ("experiment", "engine", "model", "drafter", "hardware", "benchmark")
HASH_CHARS = 6


def explicit_name(overrides: Sequence[str]) -> str | None:
    """The study name the command line gives, if it gives one."""
    for override in reversed(overrides):
        key, sep, value = override.partition("=")
        if sep and key.lstrip("+") == NAME_KEY and value not in ("", "null"):
            return value
    return None


def pinned_values(cfg: DictConfig, overrides: Sequence[str]) -> dict[str, Any]:
    """The searchable server knobs the command line sets (`server.K=v`, K one of
    sweep.config.specs.SEARCHED), with their composed values: a sweep holds them for every
    server, and a study whose space has K searches it no more (`unsearch`). Read from the
    command line, not the space, so a resume (whose space has lost K) finds the same pins."""
    pinned = {}
    for override in overrides:
        key, sep, _ = override.partition("=")
        group, _, name = key.lstrip("+").partition(".")
        if sep and group == "server" and name in SEARCHED:
            pinned[name] = OmegaConf.select(cfg, f"server.{name}")
    return pinned


def unsearch(cfg: DictConfig, pinned: Mapping[str, Any]) -> list[str]:
    """The overrides that take the pinned knobs out of the composed search space."""
    space = cfg.search.space or {}
    return [f"~search.space.{name}" for name in pinned if name in space]


def readable_parts(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """What the command line chose for the readable groups, by the chosen file's own `name`
    where it has one (`drafter=kimi_k25_eagle3_10k` reads `eagle3-10k`)."""
    parts = []
    for override in overrides:
        key, sep, choice = override.partition("=")
        group = key.lstrip("+")
        if not sep or group.split("/")[0] not in READABLE_GROUPS or "." in group:
            continue
        node = OmegaConf.select(cfg, group.replace("/", "."))
        name = node.get("name") if isinstance(node, DictConfig) else None
        parts.append(slug(str(name or choice.rsplit("/", 1)[-1])))
    return parts


def derived_name(
    cfg: DictConfig, overrides: Sequence[str], software: Mapping[str, Any], *, multirun: bool
) -> str:
    """prefix-readable-hash (see the module's docstring). A single trial (`specsweep trial`) sets
    the searched knobs it runs with; they are its configuration, not the study's setup."""
    pinned = pinned_values(cfg, overrides) if multirun else {}
    flat = setup(cfg, software, drafter=True, pinned=pinned)
    # A study keeps one objective too (sweep.study.loop.opening): another one is another study.
    flat["search.objective"] = str(cfg.search.objective)
    prefix = slug(str(cfg.search.study_prefix))
    words = [p for p in dict.fromkeys(readable_parts(cfg, overrides)) if p not in prefix]
    return "-".join([prefix, *words, digest(flat)[:HASH_CHARS]])


def slug(text: str) -> str:
    """Lower case, letters, digits, dots and single hyphens: a folder and an MLflow name."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9.]+", "-", text.lower())).strip("-")
