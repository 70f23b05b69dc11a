"""`python -m analysis.report --experiment NAME`: every figure as PNG and an HTML summary page.

Written to results/reports/NAME/ (index.html, <figure>.png, trials.csv).
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

from analysis.load import baseline, default_tracking_uri, load_runs, measured
from analysis.plots import FIGURES, title

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


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    rows = df.copy()
    rows["_order"] = rows["tok_s"].where(rows["outcome"].isin(["ok", "pruned"]), -1).fillna(-1)
    rows = rows.sort_values(["role", "_order"], ascending=[True, False])
    return rows[[c for c in COLUMNS if c in rows]].round(2)


def write_report(experiment: str, tracking_uri: str, out_dir: Path) -> Path:
    df = load_runs(experiment, tracking_uri)
    if df.empty:
        raise SystemExit(f"experiment {experiment!r} has no trials yet: run python sweep.py -m")
    out_dir.mkdir(parents=True, exist_ok=True)
    images = []
    for name, make in FIGURES.items():
        fig = make(df)
        fig.savefig(out_dir / f"{name}.png", dpi=110)
        plt.close(fig)
        images.append(name)
    table = summary_table(df)
    table.to_csv(out_dir / "trials.csv", index=False)
    base, best = baseline(df), measured(df)
    best = best[best["outcome"] == "ok"].head(1)
    verdict = "no successful trial yet"
    if not best.empty:
        b = best.iloc[0]
        ci = b.get("tok_s_ci95", float("nan"))
        verdict = f"best: {b['name']} ({b['config']}), {b['tok_s']:.1f} ± {ci:.1f} tok/s"
        if base is not None:
            verdict += (
                f", {b['tok_s'] / base['tok_s']:.2f}× the baseline ({base['tok_s']:.1f} tok/s)"
            )
    heading = html.escape(title(df, "specsweep report"))
    body = [
        f"<h1>{heading}</h1>",
        f"<p>{html.escape(verdict)}. Generated {datetime.now():%Y-%m-%d %H:%M} from "
        f"<code>{html.escape(tracking_uri)}</code>.</p>",
    ]
    if df["simulated"].any():
        body.append(
            "<p><strong>SIMULATED</strong>: engine=sim numbers come from a performance "
            "model, not from hardware.</p>"
        )
    body.append(table.to_html(index=False, na_rep="-", classes="trials"))
    body += [f'<h2>{n.replace("_", " ")}</h2><img src="{n}.png" alt="{n}">' for n in images]
    page = (
        "<!doctype html><meta charset='utf-8'><title>" + heading + "</title><style>"
        "body{font-family:sans-serif;margin:2em} table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} img{max-width:100%}"
        "</style>" + "\n".join(body)
    )
    index = out_dir / "index.html"
    index.write_text(page)
    return index


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m analysis.report", description=__doc__)
    parser.add_argument("--experiment", required=True, help="MLflow experiment (the study name)")
    parser.add_argument("--results", default="results", help="the sweep's tracking.dir")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: <results>/mlflow.db)")
    args = parser.parse_args(argv)
    uri = args.tracking_uri or default_tracking_uri(args.results)
    index = write_report(args.experiment, uri, Path(args.results) / "reports" / args.experiment)
    print(f"report: {index.resolve()}")
    print(f"figures: {', '.join(f'{n}.png' for n in FIGURES)} in {index.parent.resolve()}")


if __name__ == "__main__":
    main()
