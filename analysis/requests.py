"""`python -m analysis.requests [--results DIR] [--experiment NAME] [--out FILE.parquet]`

A study's per-request records as one table (one row per request of every trial and baseline,
warm-up included, from each trial folder's requests.jsonl), and the per-prompt comparison with
the baseline built on it: which prompts a configuration helps or hurts. Run r of every trial
sent the same prompts as run r of the baseline (harness.measure.prompt_plan), so each measured
prompt has a baseline twin.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.folders import _experiment, experiments, trial_folders
from analysis.frame import NUMERIC, ROLES
from harness.record import labels
from harness.record.layout import ResultsLayout
from harness.record.results import TrialResult

log = logging.getLogger(__name__)
# The leading columns, in this order; every other field of a record follows (e.g. category).
COLUMNS = [
    "study",
    "trial",
    "role",
    "outcome",
    "config",
    *NUMERIC,
    "phase",
    "run",
    "concurrency",
    "prompt_id",
    "round",
    "category",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "start_s",
    "first_token_s",
    "end_s",
    "ttft_s",
    "decode_tok_s",
    "accept_len",
    "finish_reason",
    "error",
]


def requests_frame(results: str | Path, experiment: str | None = None) -> pd.DataFrame:
    """Every request of the experiment's trials (all experiments when None) under `results`.
    Times are seconds on the server's clock; accept_len is tokens per verify step, when the
    server reported its verify steps."""
    rows: list[dict[str, Any]] = []
    for folder in trial_folders(Path(results)):
        if experiment is not None and _experiment(folder) != experiment:
            continue
        path = folder / "requests.jsonl"
        try:
            result = TrialResult.read(folder)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("left out %s: its result.json does not read (%s)", folder, exc)
            continue
        if result.role not in ROLES or not path.is_file():
            continue
        rows += [_row(folder, result, json.loads(line)) for line in path.open() if line.strip()]
    frame = pd.DataFrame(rows)
    for column in COLUMNS:
        if column not in frame:
            frame[column] = pd.Series(dtype=object)
    return frame[COLUMNS + sorted(c for c in frame.columns if c not in COLUMNS)]


def _row(folder: Path, result: TrialResult, record: dict[str, Any]) -> dict[str, Any]:
    params = result.effective or result.params
    first, end = record.get("first_token_s"), record.get("end_s")
    tokens, verify = record.get("completion_tokens"), record.get("verify_ct")
    ok = record.get("error") is None and end is not None and bool(tokens)
    decode = end - first if ok and first is not None and end > first else None
    return {
        "study": folder.parent.name,
        "trial": result.name,
        "role": result.role,
        "outcome": str(result.outcome),
        "config": "baseline" if result.role == "baseline" else labels.config_text(params),
        **{name: _number(params.get(name)) for name in NUMERIC},
        **record,
        "category": record.get("category") or "",  # older records do not carry it
        "ttft_s": first - record["start_s"] if first is not None else None,
        "decode_tok_s": (tokens - 1) / decode if decode else None,
        "accept_len": tokens / verify if tokens and verify else None,
    }


def prompt_changes(frame: pd.DataFrame, concurrency: int = 1) -> pd.DataFrame:
    """Per trial and measured prompt at `concurrency`: its decode tok/s against the baseline's
    on the same prompt (the first baseline of the study, not its re-check), and the relative
    change. Sorted by the size of the change, largest first."""
    ok = frame[
        (frame["phase"] == "measure")
        & (frame["concurrency"] == concurrency)
        & frame["error"].isna()
        & frame["decode_tok_s"].notna()
    ]
    per_prompt = ok.groupby(["trial", "role", "prompt_id"], as_index=False).agg(
        category=("category", "first"), tok_s=("decode_tok_s", "mean")
    )
    bases = [t for t in per_prompt[per_prompt["role"] == "baseline"]["trial"].unique()]
    first = sorted(bases, key=lambda name: ("_recheck" in name, name))[:1]
    if not first:
        return pd.DataFrame(columns=["trial", "prompt_id", "category", "base_tok_s", "tok_s"])
    base = per_prompt[per_prompt["trial"] == first[0]][["prompt_id", "tok_s"]]
    trials = per_prompt[per_prompt["role"] == "trial"]
    joined = trials.merge(base.rename(columns={"tok_s": "base_tok_s"}), on="prompt_id")
    joined["change"] = joined["tok_s"] / joined["base_tok_s"] - 1
    joined = joined.reindex(joined["change"].abs().sort_values(ascending=False).index)
    columns = ["trial", "prompt_id", "category", "base_tok_s", "tok_s", "change"]
    return joined[columns].reset_index(drop=True)


def ttft_by_round(frame: pd.DataFrame) -> pd.DataFrame:
    """TTFT of the measured requests that completed, per trial, run and round (multi-round users,
    harness.measure.rounds: how long a returning user waits as its history grows): count, mean,
    p99."""
    ok = frame[(frame["phase"] == "measure") & frame["error"].isna() & frame["ttft_s"].notna()]
    grouped = ok.groupby(["trial", "run", "round"])["ttft_s"]
    table = grouped.agg(requests="count", ttft_s_mean="mean")
    table["ttft_s_p99"] = grouped.quantile(0.99)
    return table.reset_index()


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m analysis.requests", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("--results", default="results", help="the sweep's tracking.dir")
    parser.add_argument("--experiment", help="the experiment (default: the only one in DIR)")
    parser.add_argument("--out", help="Parquet file (default: <report folder>/requests.parquet)")
    args = parser.parse_args(argv)
    experiment = args.experiment
    if experiment is None:
        found = experiments(Path(args.results))
        if len(found) != 1:
            parser.exit(2, f"error: pass --experiment NAME ({', '.join(found) or 'none found'})\n")
        experiment = found[0]
    frame = requests_frame(args.results, experiment)
    if frame.empty:
        parser.exit(2, f"error: {experiment!r} has no recorded requests under {args.results}\n")
    out = Path(args.out) if args.out else ResultsLayout.at(args.results).report(experiment)
    out = out / "requests.parquet" if not args.out else out
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(out, index=False)
    print(f"{len(frame)} requests of {frame['trial'].nunique()} trials: {out.resolve()}")
    if frame["round"].fillna(1).max() > 1:  # multi-round users: how the wait grows by round
        print(ttft_by_round(frame).to_string(index=False))


if __name__ == "__main__":
    main()
