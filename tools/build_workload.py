"""Build the bundled workload (harness/data/*.jsonl) from templates written for specsweep.

    python tools/build_workload.py          # rewrites harness/data/{prompts,long_context,...}.jsonl
    python tools/build_workload.py prompts.jsonl   # only the named file(s)

Deterministic: the same seed gives the same files. The long-context prompts quote this
repository's own source files and docs as they are when the script runs; they are stored (not
rebuilt at load time) so that editing the code does not silently change the workload and its
content hash. harness/data/prompts.jsonl's first 60 lines (the original reasoning set) are kept
as they are; the templated reasoning prompts follow them, then the further ones of
`workload_reasoning_more` (their own generator, so the files before them build as they did).
Naming files rebuilds only those: long_context.jsonl quotes files that change with the code, so
growing the reasoning set need not change it.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload_chat import datagen, datagen_pipeline, multi_turn  # noqa: E402
from workload_reasoning import reasoning  # noqa: E402
from workload_reasoning_more import SEED_MORE, distinct, reasoning_more  # noqa: E402

DATA = ROOT / "harness" / "data"
SEED = 15
ORIGINAL_REASONING = 60

# (files quoted, task): code files, alone or in pairs, so prompts run 2k to 9k tokens.
CODE_TASKS = [
    (
        ["harness/measure/bench.py"],
        "Explain what one trial's benchmark does, step by step, and why "
        "counters are read after the flush.",
    ),
    (
        ["harness/measure/client.py"],
        "Find the bug: one comparison in this file was changed. Say which "
        "line, what it breaks and the fix.",
        "bug",
    ),
    (
        ["harness/server/process.py", "harness/server/procs.py"],
        "Review these two modules: what could leak a "
        "process, and how would you test that it cannot?",
    ),
    (
        ["harness/measure/metrics.py"],
        "Refactor this module for readability without changing behaviour; "
        "show the new code and explain each change.",
    ),
    (
        ["harness/record/stats.py", "harness/record/results.py"],
        "Write pytest tests for the statistics used here: what properties should always hold?",
    ),
    (
        ["harness/server/flags.py"],
        "Find the bug: one comparison in this file was changed. Say which "
        "line, what it breaks and the fix.",
        "bug",
    ),
    (
        ["harness/sim/model/perf_model.py"],
        "Explain the performance model's equations in plain words "
        "and say which constant a GPU measurement would calibrate first.",
    ),
    (
        ["harness/sim/engine.py"],
        "Describe the scheduler loop: how prefill and decode alternate, "
        "and what happens to a request the client aborts.",
    ),
    (
        ["sweep/config/specs.py", "sweep/config/schema.py"],
        "List every validation these modules perform and propose two checks that are missing.",
    ),
    (
        ["sweep/launch/slots.py", "harness/sim/api/state.py"],
        "Find the bug: one comparison in each file "
        "was changed. Say which lines, what they break and the fix.",
        "bug",
    ),
    (
        ["harness/server/logs.py", "harness/sglang/surfaces.py"],
        "How does this code parse the server's log lines "
        "across SGLang versions? What breaks if a new version renames a field?",
    ),
    (
        ["sweep/readout/console.py"],
        "Rewrite the console output code so it could also emit JSON lines, "
        "keeping the current text output identical.",
    ),
    (
        ["harness/trial.py", "harness/measure/lossless.py"],
        "Explain the trial recipe and where the "
        "lossless check fits; what would a false alarm look like?",
    ),
    (
        ["harness/drafter_gate.py", "harness/server/gpu.py"],
        "Summarise what is checked before a server "
        "starts, and rank the checks by how much GPU time each saves.",
    ),
]
DOC_TASKS = [
    (
        "docs/benchmark.md",
        "Summarise this document for an engineer who has ten minutes, then "
        "list three questions it leaves open.",
    ),
    (
        "docs/simulator.md",
        "What does the simulator model, what does it not, and which of its "
        "numbers would you distrust first on real hardware?",
    ),
    (
        "docs/reliability.md",
        "Turn this document into a checklist an operator can follow when a sweep fails at 3 a.m.",
    ),
    (
        "docs/search.md",
        "Explain the search strategy to someone who knows Bayesian optimisation "
        "but not this project; where could it waste trials?",
    ),
    (
        "docs/architecture.md",
        "Draw (in text) the dependency graph this document describes and "
        "point out the one boundary you would defend hardest.",
    ),
    (
        "docs/configuration.md",
        "Write five example command lines for common tasks using only what "
        "this document describes, each with one sentence saying what it does.",
    ),
]
FLIPS = [(" <= ", " < "), (" >= ", " > "), (" == ", " != "), (" < ", " <= ")]


def _plant_bug(text: str, rng: random.Random) -> str:
    """Change one comparison on a code line (never in a comment or a string-only line)."""
    lines = text.splitlines()
    candidates = [
        (i, old, new)
        for i, line in enumerate(lines)
        for old, new in FLIPS
        if old in line and not line.lstrip().startswith(("#", '"', "'")) and 'f"' not in line
    ]
    i, old, new = rng.choice(candidates)
    lines[i] = lines[i].replace(old, new, 1)
    return "\n".join(lines) + "\n"


def _service_log(rng: random.Random, lines: int) -> str:
    """A synthetic service log (templates, not a real log), with one incident to find."""
    out, t = [], 8 * 3600.0
    incident = rng.randint(lines // 2, lines * 3 // 4)
    for k in range(lines):
        t += rng.expovariate(1 / 2.5)
        stamp = (
            f"2026-11-{rng.choice([3, 3, 4]):02d} {int(t // 3600) % 24:02d}:"
            f"{int(t // 60) % 60:02d}:{t % 60:06.3f}"
        )
        worker = f"w{rng.randint(1, 6)}"
        if k == incident:
            out.append(f"{stamp} ERROR {worker} pool: connection reset by peer (db-2:5432)")
        elif k > incident and rng.random() < 0.25:
            out.append(
                f"{stamp} WARN  {worker} pool: retrying query after "
                f"{rng.choice([50, 100, 200, 400])} ms (db-2 unavailable)"
            )
        else:
            route = rng.choice(["/api/orders", "/api/users", "/api/search", "/health", "/api/cart"])
            ms = rng.lognormvariate(3.2, 0.6) * (3 if k > incident else 1)
            out.append(
                f"{stamp} INFO  {worker} {rng.choice(['GET', 'POST'])} {route} "
                f"{rng.choice([200, 200, 200, 201, 304, 404])} {ms:.1f}ms"
            )
    return "\n".join(out) + "\n"


def long_context(rng: random.Random) -> list[dict[str, object]]:
    out = []
    for k, (files, task, *kind) in enumerate(CODE_TASKS):
        parts = []
        for name in files:
            text = (ROOT / name).read_text()
            if kind == ["bug"]:
                text = _plant_bug(text, rng)
            parts.append(f"=== {name} ===\n{text}")
        prompt = "Here is code from a Python project.\n\n" + "\n".join(parts) + f"\n\n{task}"
        out.append(
            {"id": f"long_context-code{k:02d}", "category": "long_context", "prompt": prompt}
        )
    for k, (name, task) in enumerate(DOC_TASKS):
        text = (ROOT / name).read_text()
        prompt = f"Here is a project's documentation, {name}.\n\n{text}\n\n{task}"
        out.append({"id": f"long_context-doc{k:02d}", "category": "long_context", "prompt": prompt})
    for k, lines in enumerate((300, 450, 650)):
        prompt = (
            "Here is a service log.\n\n" + _service_log(rng, lines) + "\nWhen did the "
            "incident start, what was its cause, and how did latency change after it? "
            "Quote the lines that show it."
        )
        out.append({"id": f"long_context-log{k:02d}", "category": "long_context", "prompt": prompt})
    return out


def _write(name: str, records: list[dict[str, object]], keep: list[str] | None = None) -> None:
    lines = list(keep or []) + [json.dumps(r, ensure_ascii=False) for r in records]
    text = ("\n".join(lines) + "\n").encode("utf-8")
    # .gz: compressed without a timestamp (mtime=0), so a rebuild is byte-identical
    (DATA / name).write_bytes(gzip.compress(text, 9, mtime=0) if name.endswith(".gz") else text)
    print(f"{name}: {len(lines)} prompts, {sum(map(len, lines)) // 1024} KiB")


def main(only: list[str]) -> None:
    rng = random.Random(SEED)
    original = (DATA / "prompts.jsonl").read_text().splitlines()[:ORIGINAL_REASONING]
    assert all(re.match(r'\{"id": "(math|code|science|logic)-\d\d"', line) for line in original)
    templated = reasoning(rng)
    seen = {json.loads(line)["prompt"] for line in original}
    more = distinct(templated + reasoning_more(random.Random(SEED_MORE)), seen)
    outputs = {"prompts.jsonl": lambda: _write("prompts.jsonl", more, keep=original)}
    long = long_context(rng)  # drawn in this order whatever is written, so each file is stable
    outputs["long_context.jsonl"] = lambda: _write("long_context.jsonl", long)
    outputs["multi_turn.jsonl"] = lambda: _write("multi_turn.jsonl", multi_turn())
    small = datagen(rng)
    outputs["datagen.jsonl"] = lambda: _write("datagen.jsonl", small)
    pipeline = datagen_pipeline(rng, small)
    outputs["datagen_pipeline.jsonl.gz"] = lambda: _write("datagen_pipeline.jsonl.gz", pipeline)
    unknown = set(only) - set(outputs)
    if unknown:
        names = ", ".join(outputs)
        raise SystemExit(f"no such output: {', '.join(sorted(unknown))}; one of {names}")
    for name, write in outputs.items():
        if not only or name in only:
            write()


if __name__ == "__main__":
    main(sys.argv[1:])
