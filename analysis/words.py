"""What the report says instead of the record's own names: outcomes, warnings, column headers
and the per-level table's values in words a reader of the page knows, never a record key
(`host_overloaded`, `equal_caps`, `tok_s_ci95`) or a bare `None`.

The searched parameters keep their names (`speculative_num_steps`): they are what the user
types on the command line and SGLang's own flags, one name from Optuna to MLflow. A name this
module does not know (a warning added later) is shown with spaces for underscores rather than
as the key.
"""

from __future__ import annotations

import pandas as pd

OUTCOMES = {
    "ok": "ok",
    "pruned": "stopped early",
    "oom": "out of memory",
    "predicted_oom": "out of memory, predicted (not launched)",
    "crash": "crashed",
    "known_crash": "crashed before, same way (not launched)",
    "timeout": "not ready in time",
    "invalid": "refused before launch",
    "duplicate": "same as an earlier trial (not launched)",
    "dominated": "same tree as a smaller launch, more draft work (not launched)",
    "error": "harness error",
    "interrupted": "interrupted",
}
# result.json's `warnings` (harness.trial, harness.measure.sim_timing, sweep's screening)
WARNINGS = {
    "host_overloaded": "host busy while it ran (SIMULATED timings partly the host's CPU)",
    "simulator_behind": "simulator fell behind its clock (its rates read low)",
    "screened": "screened with one run",
    "acceptance_decays": "acceptance falls over the output",
    "chunks_merged": "stream chunks merged (P(>=k) not read)",
    "stalled_requests": "requests stalled (runs replaced)",
    "aborted_requests": "requests aborted (runs replaced)",
    "flush_failed": "cache flush failed (runs not independent)",
    "drafter_bypassed": "drafter bypassed (accept length about 1)",
    "client_bound": "benchmark client was the limit",
    "equal_lengths": "outputs of equal length (slots finished in waves)",
    "outputs_diverge": "outputs differ from the baseline's early",
    "sglang_surface_mismatch": "server's API differs from the expected SGLang version",
}
TRIAL_COLUMNS = {
    "name": "trial",
    "role": "role",
    "config": "configuration (steps/topk/draft)",
    "outcome": "outcome",
    "tok_s": "single-stream tok/s",
    "tok_s_ci95": "± 95%",
    "accept_len": "accept length",
    "speedup_vs_baseline": "× baseline",
    "related": "inferred from",
    "warning": "warnings",
}
METRICS = {
    "decode_tok_s": "per-user decode tok/s",
    "output_tok_s": "output tok/s",
}
BASELINE_KINDS = {
    "equal_caps": "the study's baseline (the trials' request cap)",
    "uncapped": "the baseline at SGLang's own request limit (no cap)",
}
PROMPT_COLUMNS = {
    "trial": "trial",
    "prompt_id": "prompt",
    "category": "category",
    "base_tok_s": "baseline tok/s",
    "tok_s": "trial tok/s",
    "change": "change",
}


def spaced(key: str) -> str:
    return str(key).replace("_", " ")


def outcome(value: object) -> object:
    return OUTCOMES.get(str(value), spaced(str(value))) if isinstance(value, str) else value


def warnings(value: object) -> object:
    """A trial's comma-joined warning keys as phrases ("; " between them); missing stays so."""
    if not isinstance(value, str) or not value:
        return value
    return "; ".join(WARNINGS.get(key, spaced(key)) for key in value.split(","))


def trials_table(table: pd.DataFrame) -> pd.DataFrame:
    """The report's trials table in words: outcomes, warnings and headers."""
    out = table.copy()
    if "outcome" in out:
        out["outcome"] = out["outcome"].map(outcome)
    if "warning" in out:
        out["warning"] = out["warning"].map(warnings)
    return out.rename(columns=TRIAL_COLUMNS)
