"""search_efficiency's runs read back from their JSON, one report from several.

The full form (50 seeds, every set) takes hours on a 2-core machine, most of it preparing
landscapes whose simulator answers are not cached yet; the sets are independent (each its own
landscapes, the same arms on the same seeds and noise), so runs of different sets can be
rendered together. Each set comes from exactly one run, and the results' header names every run
with the sets it gave, so a reader sees which command and date measured which table.

A source is `PATH` (every set the run measured) or `PATH:SET[,SET]` (those sets of it). A merged
render's JSON is a source too: its header keeps the run behind each set.
"""

from __future__ import annotations

import json
from pathlib import Path

REQUIRED = ("sets", "seeds", "noise", "produced")
SHARED = ("seeds", "noise", "budget_launches")  # what the runs merged must have in common
ORDER = ("profiles", "family", "family-shapes", "family-memory-tight")
SET_KEYS = tuple(name.replace("-", "_") for name in ORDER)  # a family part's members, ranges


def _source(spec: str) -> tuple[Path, list[str] | None]:
    path, _, names = spec.rpartition(":")
    if path and "/" not in names and not Path(spec).exists():
        return Path(path), [n for n in names.split(",") if n]
    return Path(spec), None


def merged(specs: list[str]) -> dict:
    """One report from the runs `specs` name (ValueError, naming the source and the fix, where
    one is not a run's JSON, lacks a set asked for, disagrees with the first on seeds, noise or
    budget, or gives a set another already gave)."""
    report: dict = {}
    runs, whole = [], True
    for spec in specs:
        path, names = _source(spec)
        run = json.loads(path.read_text())
        missing = [key for key in REQUIRED if key not in run]
        if missing:
            raise ValueError(
                f"{spec}: no {', '.join(missing)}: not a JSON this benchmark wrote (or one from "
                "before runs kept 'produced', the command, date and machine); rerun the benchmark"
            )
        whole = whole and names is None
        names = names or list(run["sets"])
        absent = [n for n in names if n not in run["sets"]]
        if absent:
            raise ValueError(f"{spec}: no set {', '.join(absent)}; it has {', '.join(run['sets'])}")
        if not report:  # the first run's header keys; each set's own keys come with the set
            report = {k: v for k, v in run.items() if k not in ("sets", *SET_KEYS)}
            report["sets"] = {}
        for key in SHARED:
            if run.get(key) != report.get(key):
                raise ValueError(
                    f"{spec}: {key} {run.get(key)} where {specs[0]} has {report.get(key)}; "
                    "tables rendered together must come from runs with the same seeds, noise "
                    "and budget"
                )
        twice = [n for n in names if n in report["sets"]]
        if twice:
            raise ValueError(
                f"{spec}: set {', '.join(twice)} is given by an earlier source too; name it "
                "once (PATH:SET picks a run's sets)"
            )
        for name in names:
            report["sets"][name] = run["sets"][name]
            key = name.replace("-", "_")
            if key in run:
                report[key] = run[key]
        report["arms"] = {**run.get("arms", {}), **report.get("arms", {})}
        runs.extend(_records(run["produced"], names))
    report["sets"] = {n: report["sets"][n] for n in sorted(report["sets"], key=_rank)}
    # one whole run: its record as it was; else every run with the sets it gave
    report["produced"] = run["produced"] if len(runs) == 1 and whole else runs
    return report


def _records(produced: dict | list, names: list[str]) -> list[dict]:
    """The runs behind `names`: a run's own record, or, where the source is itself a merged
    render (`produced` a list), each of its runs with those of its sets that were picked."""
    if isinstance(produced, dict):
        return [{**produced, "sets": names}]
    picked = ({**run, "sets": [n for n in run["sets"] if n in names]} for run in produced)
    return [run for run in picked if run["sets"]]


def _rank(name: str) -> int:
    return ORDER.index(name) if name in ORDER else len(ORDER)


__all__ = ["merged"]
