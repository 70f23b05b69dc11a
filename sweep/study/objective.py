"""What a study optimises, and the values a trial's result gives it."""

from __future__ import annotations

from harness.results import TrialResult


class Objective:
    """`tok_s`, `speedup`, `throughput` or `tok_s+throughput` (both: a Pareto front)."""

    CHOICES = ("tok_s", "speedup", "throughput", "tok_s+throughput")

    def __init__(self, name: str, throughput_concurrency: int):
        if name not in self.CHOICES:
            raise ValueError(f"search.objective={name!r}: use one of {', '.join(self.CHOICES)}")
        self.name = name
        self.concurrency = throughput_concurrency
        throughput = f"output_tok_s_c{throughput_concurrency}"
        self.metrics = {
            "tok_s": ["tok_s"],
            "speedup": ["tok_s"],
            "throughput": [throughput],
            "tok_s+throughput": ["tok_s", throughput],
        }[name]
        self.labels = {
            "tok_s": ["single-stream tok/s"],
            "speedup": ["speedup vs baseline"],
            "throughput": [f"throughput tok/s @ {throughput_concurrency}"],
            "tok_s+throughput": [
                "single-stream tok/s",
                f"throughput tok/s @ {throughput_concurrency}",
            ],
        }[name]

    @property
    def multi(self) -> bool:
        return len(self.metrics) > 1

    @property
    def directions(self) -> list[str]:
        return ["maximize"] * len(self.metrics)

    def values(self, result: TrialResult, baseline_tok_s: float | None) -> list[float] | None:
        values = [result.metrics.get(m) for m in self.metrics]
        if any(v is None for v in values):
            return None
        if self.name == "speedup":
            if not baseline_tok_s:
                return None
            values = [values[0] / baseline_tok_s]
        return [float(v) for v in values]  # type: ignore[arg-type]

    def run_metric(self) -> tuple[str, int | None]:
        """The per-run value early stopping watches (RunSummary field, concurrency level)."""
        if self.metrics[0] == "tok_s":
            return "decode_tok_s", None
        return "output_tok_s", self.concurrency
