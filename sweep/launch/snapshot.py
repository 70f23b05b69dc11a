"""A study's configuration, frozen: every trial of every sweep composes from the same files.

Hydra composes each trial anew from conf/ (sweep.launch.jobs), so a file edited while a sweep
runs would change every later trial (an edit of `runs: 5` to `2` made later trials 2-run ones and
one of them the "Best"). The first sweep of a study copies conf/ into the study's folder
(`<tracking.dir>/<study>/snapshot/conf`, with a manifest of file digests) and composes from that
copy; a later sweep of the study (a resume, another worker) composes from the study's copy too,
so the command line is the only way a study changes. Files edited since are named: where they
change what a measurement depends on (sweep.config.setup_key), the sweep is refused with each
key that changed, because its trials could not be compared with the study's (a derived study
name changes with the setup, so only a name given with search.study_name meets this); other
edits (a search file) are reported as not applied.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.config_search_path import ConfigSearchPath
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from harness.errors import ConfigError
from sweep.config.setup_key import differences, setup

FOLDER = "snapshot"
MANIFEST = "manifest.json"
MAIN = "main"  # the search-path entry of the application's own conf/ (hydra.main config_path)


@dataclass(frozen=True)
class Snapshot:
    conf: Path  # the frozen copy of conf/ that trials compose from
    created: bool  # by this sweep (the study's first): staged until `commit`
    changed: tuple[str, ...]  # files of conf/ that differ from the copy (relative paths)


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def main_conf_dir(search_path: ConfigSearchPath) -> Path:
    for element in search_path.get_path():
        if element.provider == MAIN and element.path:
            return Path(element.path.removeprefix("file://"))
    raise ConfigError("no application config directory in Hydra's search path (conf/)")


def take(conf: Path, study_dir: Path) -> Snapshot:
    """The study's snapshot if it has one; else a staged copy of `conf` outside the study, which
    `commit` makes the study's once the sweep's checks pass (a refused first sweep leaves none,
    so fixing a file after it is not an edit of the study)."""
    frozen = study_dir / FOLDER / "conf"
    if (study_dir / FOLDER / MANIFEST).is_file():
        now, then = _digests(conf), _digests(frozen)  # what trials compose from
        changed = sorted(name for name in {*then, *now} if then.get(name) != now.get(name))
        return Snapshot(frozen, False, tuple(changed))
    staging = Path(tempfile.mkdtemp(prefix="specsweep-snapshot-"))
    shutil.copytree(conf, staging / "conf", ignore=shutil.ignore_patterns("__pycache__"))
    manifest = {"source": str(conf), "files": _digests(staging / "conf")}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return Snapshot(staging / "conf", True, ())


def commit(snap: Snapshot, study_dir: Path) -> Path:
    """Where the study's snapshot is now: a staged one is copied into the study folder beside
    its place and renamed into it, so workers starting together keep one (the first)."""
    if not snap.created:
        return snap.conf
    target = study_dir / FOLDER
    study_dir.mkdir(parents=True, exist_ok=True)
    beside = Path(tempfile.mkdtemp(prefix=".snapshot-", dir=study_dir))
    shutil.copytree(snap.conf.parent, beside, dirs_exist_ok=True)
    try:
        os.rename(beside, target)
    except OSError:  # another worker's snapshot won: the same files, or it would be refused
        shutil.rmtree(beside, ignore_errors=True)
    return target / "conf"


def discard(snap: Snapshot | None) -> None:
    """A staged copy goes once it is the study's or the sweep was refused; a study's stays."""
    if snap is not None and snap.created:
        shutil.rmtree(snap.conf.parent, ignore_errors=True)


def loader_for(search_path: ConfigSearchPath, conf: Path) -> ConfigLoaderImpl:
    """Hydra's config loader with the application's conf/ replaced by `conf`."""
    replaced = type(search_path)()  # ConfigSearchPathImpl
    for element in search_path.get_path():
        path = f"file://{conf}" if element.provider == MAIN else element.path
        replaced.append(element.provider, path)
    return ConfigLoaderImpl(config_search_path=replaced)


def recompose(loader: ConfigLoaderImpl, config: DictConfig) -> DictConfig:
    """The sweep's own config as Hydra composed it, from the loader's files instead."""
    overrides = [*config.hydra.overrides.hydra, *config.hydra.overrides.task]
    fresh = loader.load_configuration(
        config_name=config.hydra.job.config_name,
        overrides=list(overrides),
        run_mode=RunMode.MULTIRUN,
    )
    OmegaConf.copy_cache(from_config=config, to_config=fresh)
    return fresh


def setup_differs(current: DictConfig, frozen: DictConfig) -> list[str]:
    """`key: frozen → current` for each key of the setup (sweep.config.setup_key) an edit of
    conf/ changed; empty where the edit changes nothing a measurement depends on."""
    return differences(setup(frozen, drafter=True), setup(current, drafter=True))
