"""`python -m analysis.report [--results DIR] [--experiment NAME]`: every figure as PNG and an
HTML summary page, written to DIR/reports/NAME/ (index.html, <figure>.png, trials.csv, and from
the trial folders requests.parquet and prompts.csv: the prompts the best trial helps or hurts).

Read from the trial folders under DIR (no tracking store needed); `--source mlflow` (or
`--tracking-uri URI`) reads the MLflow copy instead.
"""

from __future__ import annotations

import argparse
import html
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt
import pandas as pd

from analysis import levels, objective
from analysis.capacity import available as capacity_figures
from analysis.frame import baseline, measured, trials
from analysis.load import SOURCES, default_tracking_uri, experiments, load_runs
from analysis.plots import FIGURES, WITHOUT_DATA, ranked, title
from analysis.requests import prompt_changes, requests_frame
from harness.record.layout import ResultsLayout

COLUMNS = [
    "name",
    "role",
    "config",
    "outcome",
    "tok_s",
    "tok_s_ci95",
    "accept_len",
    "speedup_vs_baseline",
    "related",
    "warning",
]
PROMPTS = 10  # rows of the per-prompt table


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    rows = df.copy()
    rows["_order"] = rows["tok_s"].where(rows["outcome"].isin(["ok", "pruned"]), -1).fillna(-1)
    rows = rows.sort_values(["role", "_order"], ascending=[True, False])
    return rows[[c for c in COLUMNS if c in rows]].round(2)


def write_report(
    df: pd.DataFrame,
    out_dir: Path,
    origin: str,
    requests: pd.DataFrame | None = None,
    study_dirs: list[Path] | None = None,
) -> Path:
    """The report of one experiment's frame (`analysis.load.load_runs`); origin says where the
    rows were read from (a folder or a tracking URI); `requests` (analysis.requests) adds the
    per-request table and the per-prompt comparison with the baseline."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if df.empty:  # an interrupted first sweep: a page that says so, not an error
        return _nothing_yet(out_dir, origin, study_dirs or [])
    # Ranked and labelled by the study's objective, as its console was (analysis.objective).
    df = objective.apply(df, objective.latest_objective(study_dirs or []))
    images = []
    extra = {"speedup_vs_concurrency": levels.speedup_vs_concurrency, **capacity_figures(df)}
    omitted = []
    no_trial = measured(trials(df)).empty
    for name, make in {**FIGURES, **extra}.items():  # capacity: where recorded
        fig = None if no_trial else make(df)
        if fig is None:  # no data for it: said in the report instead of an empty figure
            why = "no trial measured yet" if no_trial else WITHOUT_DATA.get(name, "no data")
            omitted.append(f"{name.replace('_', ' ')}: {why}")
            (out_dir / f"{name}.png").unlink(missing_ok=True)  # not an earlier report's
            continue
        fig.savefig(out_dir / f"{name}.png", dpi=110)
        plt.close(fig)
        images.append(name)
    table = summary_table(df)
    table.to_csv(out_dir / "trials.csv", index=False)
    rank = objective.of(df)
    base, best = baseline(df), ranked(df)
    best = best[best["outcome"] == "ok"].head(1)
    verdict = "no successful trial yet"
    if not best.empty:
        b = best.iloc[0]
        value, ci = b[rank.column], b.get(rank.ci, float("nan"))
        verdict = f"best: {b['name']} ({b['config']}), {value:.1f} ± {ci:.1f} {rank.label}"
        if base is not None and not pd.isna(base.get(rank.column, float("nan"))):
            verdict += f", {value / base[rank.column]:.2f}× the baseline ({base[rank.column]:.1f})"
    heading = html.escape(title(df, "specsweep report"))
    answer = levels.latest_deploy(study_dirs or [])  # the study's answer, as the console said it
    body = [f"<h1>{heading}</h1>"]
    if answer:
        body.append(f"<p><strong>{html.escape(answer)}</strong></p>")
        verdict = f"fastest measured: {verdict.removeprefix('best: ')}"
    body.append(
        f"<p>{html.escape(verdict)}. Generated {datetime.now():%Y-%m-%d %H:%M} from "
        f"<code>{html.escape(origin)}</code>.</p>"
    )
    if df["simulated"].any():
        body.append(
            "<p><strong>SIMULATED</strong>: engine=sim numbers come from a performance "
            "model, not from hardware.</p>"
        )
    body.append(table.to_html(index=False, na_rep="-", classes="trials"))
    body += _levels_section(study_dirs or [], out_dir)
    if requests is not None and not requests.empty:
        requests.to_parquet(out_dir / "requests.parquet", index=False)
        body += _prompt_section(requests, best, out_dir)
    body += [f'<h2>{n.replace("_", " ")}</h2><img src="{n}.png" alt="{n}">' for n in images]
    if omitted:
        body.append(
            "<p>Figures left out, having no data: "
            + "; ".join(html.escape(o) for o in omitted)
            + ".</p>"
        )
    page = (
        "<!doctype html><meta charset='utf-8'><title>" + heading + "</title><style>"
        "body{font-family:sans-serif;margin:2em} table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} img{max-width:100%}"
        "</style>" + "\n".join(body)
    )
    index = out_dir / "index.html"
    index.write_text(page)
    return index


def _nothing_yet(out_dir: Path, origin: str, study_dirs: list[Path]) -> Path:
    """The report of a study with no trial or baseline finished (its first sweep interrupted):
    the study's own line for it, and no figure."""
    for stale in [*out_dir.glob("*.png"), out_dir / "trials.csv"]:
        stale.unlink(missing_ok=True)  # not an earlier report's
    answer = levels.latest_deploy(study_dirs) or "No recommendation: nothing was measured yet."
    page = (
        "<!doctype html><meta charset='utf-8'><title>specsweep report</title>"
        f"<h1>specsweep report — {html.escape(out_dir.name)}</h1>"
        f"<p><strong>{html.escape(answer)}</strong></p>"
        "<p>No trial and no baseline finished in this study, so there is no table and no "
        f"figure. Generated {datetime.now():%Y-%m-%d %H:%M} from "
        f"<code>{html.escape(origin)}</code>.</p>"
    )
    index = out_dir / "index.html"
    index.write_text(page)
    return index


def _levels_section(study_dirs: list[Path], out_dir: Path) -> list[str]:
    """The sweep's per-level recommendation and Optuna's parameter importances, when written."""
    body = []
    rows = levels.latest_levels(study_dirs)
    if rows:
        table = levels.levels_table(rows)
        table.to_csv(out_dir / "levels.csv", index=False)
        body += [
            "<h2>recommendation per level (paired 95% speedup intervals; "
            "speculation off where no configuration beats the baseline)</h2>",
            table.to_html(index=False, na_rep="-", classes="trials"),
        ]
    weights = levels.importances(study_dirs)
    if not weights.empty:
        weights.to_csv(out_dir / "importances.csv")
        body += [
            "<h2>parameter importances (Optuna, fANOVA; feasible measured trials)</h2>",
            weights.to_html(na_rep="-", classes="trials"),
        ]
    return body


def _prompt_section(requests: pd.DataFrame, best: pd.DataFrame, out_dir: Path) -> list[str]:
    """The best trial's PROMPTS prompts with the largest relative tok/s change vs the baseline
    on the same prompt (all trials' in prompts.csv)."""
    changes = prompt_changes(requests)
    changes.round(4).to_csv(out_dir / "prompts.csv", index=False)
    if best.empty or changes.empty:
        return []
    name = best.iloc[0]["name"]
    top = changes[changes["trial"] == name].head(PROMPTS).copy()
    top["change"] = (100 * top["change"]).map("{:+.1f}%".format)
    return [
        f"<h2>prompts {html.escape(name)} helps or hurts most (decode tok/s vs the baseline "
        "on the same prompt; every trial in prompts.csv)</h2>",
        top.round(1).to_html(index=False, na_rep="-", classes="trials"),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m analysis.report", description=__doc__)
    parser.add_argument("--results", default="results", help="the sweep's tracking.dir")
    parser.add_argument(
        "--experiment", help="the study (default: the one swept last under --results)"
    )
    parser.add_argument(
        "--source",
        choices=SOURCES,
        help="read the trial folders (default) or MLflow (default with --tracking-uri)",
    )
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: <results>/mlflow.db)")
    args = parser.parse_args(argv)
    source = args.source or ("mlflow" if args.tracking_uri else "folders")
    uri = args.tracking_uri or default_tracking_uri(args.results)
    experiment = args.experiment or _only_experiment(parser, args.results)
    try:
        df = load_runs(
            experiment, uri if source == "mlflow" else None, results=args.results, source=source
        )
    except ValueError as exc:
        parser.exit(2, f"error: {exc}\n")
    origin = uri if source == "mlflow" else str(Path(args.results).resolve())
    requests = requests_frame(args.results, experiment)
    out = ResultsLayout.at(args.results).report(experiment)
    index = write_report(df, out, origin, requests, levels.study_folders(args.results, df))
    print(f"report: {index.resolve()}")
    written = sorted(p.name for p in index.parent.glob("*.png"))
    shown = ", ".join(written) or "none (nothing measured yet)"
    print(f"figures: {shown} in {index.parent.resolve()}")


def _only_experiment(parser: argparse.ArgumentParser, results: str) -> str:
    """The study swept last under `results` (or the only one with trial folders), said so."""
    found = experiments(results)
    latest = ResultsLayout.at(results).latest_study()
    chosen = latest if latest in found else (found[0] if len(found) == 1 else None)
    if chosen is None:
        listed = ", ".join(found) if found else f"no trial folders under {results}"
        parser.exit(2, f"error: pass --experiment NAME ({listed})\n")
    print(f"study {chosen} (swept last under {results}; --experiment NAME for another)")
    return chosen


if __name__ == "__main__":
    main()
