"""A study is one setup: the setup its first sweep recorded, and the refusal of a later sweep (or
a single trial) whose setup differs, before anything starts; and the baseline it stored, which
every later sweep, worker and single trial of the study compares with.

The setup (sweep.config.setup_key.setup: engine and software, model, drafter, hardware,
benchmark, the fixed server knobs, the prompts, the sampling, the knobs held on the command line)
is recorded in the Optuna study's user attrs, which every worker and resume reads, and as
`setup.json` in the study's folder for people. A derived study name already differs with the
setup (sweep.config.study_name); a name given with `search.study_name` whose study recorded
another setup is refused with each key that differs, stored -> now, so no table, verdict,
report, MLflow view, resolve round or export ever ranks trials of two setups together, and a
simulated and a real measurement never share a study.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna

from sweep.config.setup_key import differences

SETUP_ATTR = "setup"
SETUP_FILE = "setup.json"
BASELINE_ATTR = "baseline"  # baseline.<setup key>[.uncapped]: sweep.study.loop.baseline measures it
SHOWN = 8  # differing keys named in the refusal; the rest are counted


def refusal(name: str, stored: Mapping[str, Any], now: Mapping[str, Any], derived: str) -> str:
    """Why a sweep cannot join study `name`, and the ways out: the setup's own study (the name
    the sweep derives without search.study_name), or another name."""
    found = differences(stored, now)
    shown = "; ".join(found[:SHOWN]) + (
        f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    )
    return (
        f"study {name!r} measured another setup, so its trials and this command's cannot be "
        f"compared ({len(found)} key{'s' if len(found) != 1 else ''} differ: {shown}). "
        f"Drop search.study_name to land in this setup's own study ({derived}), or name a new "
        f"one; to continue {name!r}, run it with its own setup ({SETUP_FILE} in its folder "
        "lists it)."
    )


def unrecorded(name: str, trials: int, derived: str) -> str:
    """A study with trials and no recorded setup (made before studies recorded theirs)."""
    return (
        f"study {name!r} has {trials} trial(s) but no recorded setup, so this sweep cannot tell "
        f"whether they measured the same one. Drop search.study_name to land in this setup's "
        f"own study ({derived}), or name a new one; the old study's trials stay readable "
        "(specsweep report)."
    )


def check(study: optuna.Study, setup: Mapping[str, Any], derived: str) -> str | None:
    """None where the study is new or recorded this setup; else the refusal's text."""
    stored = study.user_attrs.get(SETUP_ATTR)
    if stored is None:
        trials = len(study.get_trials(deepcopy=False))
        return unrecorded(study.study_name, trials, derived) if trials else None
    if dict(stored) == dict(setup):
        return None
    return refusal(study.study_name, stored, setup, derived)


def record(study: optuna.Study, study_dir: Path, setup: Mapping[str, Any]) -> None:
    """The setup in the study (for every worker and resume) and beside its trials (for people)."""
    if SETUP_ATTR not in study.user_attrs:
        study.set_user_attr(SETUP_ATTR, dict(setup))
    study_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(dict(setup), indent=2, sort_keys=True, default=str) + "\n"
    path = study_dir / SETUP_FILE
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def baseline_attr(setup_key: str, uncapped: bool = False) -> str:
    """Where a study keeps its baseline: one per setup key (the drafter left out, which a
    baseline does not run), and one at SGLang's own running-request limit where measured."""
    return f"{BASELINE_ATTR}.{setup_key}{'.uncapped' if uncapped else ''}"


def stored_baseline(study: optuna.Study, setup_key: str, uncapped: bool = False):
    """The study's baseline for this setup key as a TrialResult, from its folder where it is on
    this machine, else from the record the study keeps (measured on another node); None where
    the study has none."""
    from harness.record.results import TrialResult

    stored = study.user_attrs.get(baseline_attr(setup_key, uncapped))
    if not stored:
        return None
    if (Path(stored["folder"]) / "result.json").is_file():
        return TrialResult.read(Path(stored["folder"]))
    if "result" in stored:
        return TrialResult.from_dict(stored["result"])
    return None


def existing_study(name: str, storage_url: str) -> optuna.Study | None:
    """The study, where its store and the study exist; never creates either (a single trial
    only reads)."""
    if storage_url.startswith("sqlite:///"):
        path = Path(storage_url.removeprefix("sqlite:///"))
        if not path.is_file():
            return None
    try:
        return optuna.load_study(study_name=name, storage=storage_url)
    except KeyError:
        return None
