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

from analysis import levels, objective, tables, words
from analysis.figures import FIGURES, TITLES
from analysis.frame import baseline, measured, trials
from analysis.load import SOURCES, default_tracking_uri, experiments, load_runs
from analysis.plots import ranked, title
from analysis.requests import prompt_changes, requests_frame
from harness.record.layout import ResultsLayout

PROMPTS = 10  # rows of the per-prompt table


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
    # The per-level table's rows: the speedup figure's note compares its bars with them.
    df.attrs["levels"] = levels.latest_levels(study_dirs or [])
    figures = _figures(df, out_dir)
    tables.trials_csv(df).to_csv(out_dir / "trials.csv", index=False)
    table, table_said = tables.trials_table(df)
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
    body += _left_out(table_said)
    body += _levels_section(study_dirs or [], out_dir, df)
    if requests is not None and not requests.empty:
        requests.to_parquet(out_dir / "requests.parquet", index=False)
        body += _prompt_section(requests, best, out_dir)
    for name, why in figures:  # each where it belongs, or the line that says why it is not
        body.append(f"<h2>{html.escape(TITLES[name])}</h2>")
        body.append(
            f'<img src="{name}.png" alt="{html.escape(TITLES[name])}">'
            if why is None
            else f"<p class='left-out'>Left out: {html.escape(why)}.</p>"
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


def _figures(df: pd.DataFrame, out_dir: Path) -> list[tuple[str, str | None]]:
    """Each figure written as PNG, with None; or left out, with the line why (analysis.absent)."""
    no_trial = measured(trials(df)).empty
    drawn = []
    for name, (make, reason) in FIGURES.items():
        why = "no trial measured yet" if no_trial else reason(df)
        fig = None if why else make(df)
        (out_dir / f"{name}.png").unlink(missing_ok=True)  # not an earlier report's
        if fig is None:
            drawn.append((name, why or "no data"))
            continue
        fig.savefig(out_dir / f"{name}.png", dpi=110)
        plt.close(fig)
        drawn.append((name, None))
    return drawn


def _left_out(lines: list[str]) -> list[str]:
    """Columns or tables left out, a line each, where they would be."""
    return [f"<p class='left-out'>Left out: {html.escape(line)}.</p>" for line in lines]


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


def _levels_section(study_dirs: list[Path], out_dir: Path, df: pd.DataFrame) -> list[str]:
    """The sweep's per-level recommendation and Optuna's parameter importances, when written;
    a column or table with nothing to show is a line instead."""
    body = []
    rows = levels.latest_levels(study_dirs)
    if rows:
        table, said = tables.levels_table(rows)
        table.to_csv(out_dir / "levels.csv", index=False)
        body += [
            "<h2>Recommendation per level (paired 95% speedup intervals; "
            "speculation off where no configuration beats the baseline)</h2>",
            table.to_html(index=False, na_rep="-", classes="trials"),
            *_left_out(said),
        ]
    (out_dir / "importances.csv").unlink(missing_ok=True)  # not an earlier report's
    if study_dirs:
        weights, said = tables.importances(study_dirs, df)
        body.append("<h2>Parameter importances (Optuna's fANOVA, measured trials)</h2>")
        if weights is not None:
            weights.to_csv(out_dir / "importances.csv", index=False)
            body.append(weights.to_html(index=False, na_rep="-", classes="trials"))
        body += _left_out(said)
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
    top = top.round(1).rename(columns=words.PROMPT_COLUMNS)
    return [
        f"<h2>Prompts {html.escape(name)} helps or hurts most (decode tok/s vs the baseline "
        "on the same prompt; every trial in prompts.csv)</h2>",
        top.to_html(index=False, na_rep="-", classes="trials"),
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
