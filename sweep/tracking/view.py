"""The study's view in MLflow's UI: its trials and baseline side by side, without a click.

What MLflow 3.17.2's UI does on its own (read in its bundle,
mlflow/server/js/build/static/js/, and checked in headless Chromium, docs/analysis.md):
- An experiment opens on the GenAI overview (0 traces) unless the URL says
  `workflowType=machine_learning` (or the browser remembers the "Model training" switch): the
  `mlflow.experimentKind` tag no longer decides it.
- The runs list nests child runs under their parent, collapsed, and shows no metric column.
- A saved view is an experiment tag `mlflow.sharedViewState.<key>` holding
  {"name", "createdAt", "updatedAt", "state"}, where "state" is the search facets and the UI
  state as a JSON string (the UI's "Save view" writes the same; it lists it under "Views"), and
  `#/experiments/<id>/runs?viewStateShareKey=<key>` opens it. The UI drops runsExpanded,
  runsPinned, runsHidden and runsVisibilityMap from a shared view, so a view cannot expand a
  parent run; but a list sorted by anything other than its start time is flat: every matching
  run is a row of its own (the child runs keep their parent id).

So each sweep writes one view per study, under a key its name gives, with the same content
every time (a resumed sweep rewrites it, keeping createdAt): the study's trials and baselines
(duplicates, which repeat another trial's numbers, left out), best first by the objective, with
the objective, tok_s, accept_len, speedup_vs_baseline, the outcome and the searched values as
columns; and on the chart tab, bars of those metrics for the first ten and the searched values
against the objective.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from hashlib import sha1
from typing import Any
from urllib.parse import urlencode

from mlflow.tracking import MlflowClient

from sweep.readout.console import console

VIEW_TAG_PREFIX = "mlflow.sharedViewState."
SHARE_PARAM = "viewStateShareKey"
WORKFLOW = ("workflowType", "machine_learning")
RUN_METRICS = ("tok_s", "accept_len", "speedup_vs_baseline")
OUTCOME_TAG = "specsweep.outcome"
# Objectives the driver derives from per-level metrics
# (sweep.study.trial.objective.Objective.PER_LEVEL):
# no run carries them, so the view sorts by tok_s instead.
NOT_RUN_METRICS = ("weighted_throughput", "weighted_speed")
SECTION = "specsweep-section"  # its two sections: -metrics, -params
# The UI's own sections for every other metric, kept folded so the chart tab opens on ours.
FOLDED = ("Model metrics", "System metrics")


def view_key(study: str) -> str:
    """The study's key: its name where that is URL-safe, else a slug and a digest of the name."""
    slug = re.sub(r"[^A-Za-z0-9_-]", "-", study)
    if slug != study:
        slug += "-" + sha1(study.encode()).hexdigest()[:8]
    return f"specsweep-{slug}"


def column(kind: str, key: str) -> str:
    """A column's id as the UI writes it: metrics.`tok_s`, params.`...`, tags.`...`."""
    return f"{kind}.`{key}`"


def sort_metric(objective_metrics: Sequence[str]) -> str:
    """The run metric the view ranks by: the objective's first value where runs carry it."""
    first = objective_metrics[0] if objective_metrics else "tok_s"
    return "tok_s" if first in NOT_RUN_METRICS else first


def study_filter(study: str) -> str:
    """The study's measured runs; the clause on the study is left out where its name holds both
    quote characters (MLflow's filter has no escape)."""
    clauses = [f"tags.`{OUTCOME_TAG}` != 'duplicate'"]
    quote = next((q for q in "'\"" if q not in study), None)
    if quote is not None:
        clauses.insert(0, f"tags.`specsweep.study` = {quote}{study}{quote}")
    return " and ".join(clauses)


def view_state(study: str, objective_metrics: Sequence[str], params: Sequence[str]) -> dict:
    """The search facets and UI state of the study's view (the UI's own keys)."""
    sort = sort_metric(objective_metrics)
    logged = [m for m in objective_metrics if m not in NOT_RUN_METRICS]
    metrics = list(dict.fromkeys([sort, *RUN_METRICS, *logged]))
    columns = [column("metrics", m) for m in metrics]
    columns += [column("tags", OUTCOME_TAG)] + [column("params", p) for p in params]
    # the outcome header whole; the numbers (full floats) and the flag names are cut, wholly in
    # their tooltips
    widths = {c: {"m": 110, "t": 140, "p": 140}[c[0]] for c in columns}
    charts, sections = chart_tab(study, metrics, params, sort)
    return {
        "searchFilter": study_filter(study),
        "orderByKey": column("metrics", sort),
        "orderByAsc": False,
        "selectedColumns": columns,
        "columnOrder": columns,
        "columnWidths": widths,
        "compareRunCharts": charts,
        "compareRunSections": sections,
        "isAccordionReordered": True,
    }


def chart_tab(
    study: str, metrics: Sequence[str], params: Sequence[str], sort: str
) -> tuple[list[dict], list[dict]]:
    """The chart tab's cards and sections: a bar chart per metric for the first ten runs (the
    list's order: the baseline and the best trials), then the searched values against the
    ranking metric across the width; the UI's own sections for the other metrics, folded."""
    own = [(f"{SECTION}-metrics", f"{study}: trials and baseline", {"columns": 3})]
    own.append((f"{SECTION}-params", f"searched values against {sort}", {"columns": 1}))

    def card(n: int, section: int, kind: str, **config: Any) -> dict:
        return {
            "uuid": f"specsweep-chart-{n}",
            "type": kind,
            "runsCountToCompare": 10,
            "metricSectionId": own[section][0],
            "deleted": False,
            "isGenerated": False,
            **config,
        }

    charts = [card(n, 0, "BAR", metricKey=m, displayName=m) for n, m in enumerate(metrics)]
    charts.append(
        card(len(charts), 1, "PARALLEL", selectedParams=list(params), selectedMetrics=[sort])
    )
    shown = [(uuid, name, True, extra) for uuid, name, extra in own]
    folded = [(f"specsweep-{n.split()[0].lower()}", n, False, {}) for n in FOLDED]
    sections = [
        {
            "uuid": uuid,
            "name": name,
            "display": display,
            "isReordered": False,
            "deleted": False,
            "isGenerated": not display,
            **extra,
        }
        for uuid, name, display, extra in shown + folded
    ]
    return charts, sections


def created_at(envelope: str | None) -> int | None:
    """When an earlier sweep first wrote the view; None for none, or a tag that is not a view's
    envelope (made by hand: this one replaces it)."""
    try:
        return int(json.loads(envelope)["createdAt"]) if envelope else None
    except (ValueError, KeyError, TypeError):
        return None


def write_view(
    client: MlflowClient,
    experiment_id: str,
    study: str,
    objective_metrics: Sequence[str],
    params: Sequence[str],
) -> str | None:
    """Write (or rewrite) the study's view; its key, or None when MLflow refused it (a
    warning: the view is a convenience, the runs are all there without it)."""
    key = view_key(study)
    tag = VIEW_TAG_PREFIX + key
    sort = sort_metric(objective_metrics)
    now = int(time.time() * 1000)
    try:
        old = client.get_experiment(experiment_id).tags.get(tag)
        envelope = {
            "name": f"specsweep: {study}, best {sort} first",
            "createdAt": created_at(old) or now,
            "updatedAt": now,
            "state": json.dumps(view_state(study, objective_metrics, params)),
        }
        client.set_experiment_tag(experiment_id, tag, json.dumps(envelope))
    except Exception as exc:  # a tracking server that refuses the tag: the sweep goes on
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        console.print(
            f"[bold yellow]warning:[/] MLflow's view of the study ({key}) not written "
            f"({type(exc).__name__}: {first}); the runs are there, without its columns.",
            soft_wrap=True,
        )
        return None
    return key


def view_link(ui_url: str, experiment_id: str, key: str | None, mode: str | None = None) -> str:
    """The UI's address of the study's view (its router is in the fragment): the runs list in
    the machine-learning workflow, with the view where it was written; `mode`: CHART for the
    chart tab."""
    query = {SHARE_PARAM: key} if key else {}
    query[WORKFLOW[0]] = WORKFLOW[1]
    if mode:
        query["compareRunsMode"] = mode
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{urlencode(query)}"
