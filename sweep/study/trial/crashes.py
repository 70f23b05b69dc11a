"""Deterministic crashes: a configuration that failed the same way twice is not launched again.

A crash or a timeout may be flaky (a port taken a moment, a slow disk, a kernel race), so one is
not enough: the configuration gets its second chance. When the same candidate
(`sweep.study.trial.candidates`) fails a second time with the same signature, the failure is taken
to be deterministic (SGLang refusing topk > 1 with an attention backend, a kernel that always
faults for a shape): the second failure and every later proposal of the candidate are told to
Optuna as infeasible (constraint `crash` > 0, like an OOM), and no proposal of it is launched
again (`known_crash`, `sweep.study.loop.decisions`).

The signature is the outcome plus the first line of the log that says why: the exception line of
a traceback (`ValueError: ...`), else the first fatal line (`harness.server.logs`), else the
harness's own message; with timestamps, pids, addresses and numbers taken out, so two runs of the
same failure compare equal. A stalled start-up (`harness.server.process`) is its phase alone: how
far its bar got and how long it had run differ between two runs of the same hang.
"""

from __future__ import annotations

import re
from collections import Counter

from optuna.trial import FrozenTrial

from harness.record.results import Outcome, TrialResult
from harness.server.logs import is_fatal_line

FAILED = (Outcome.CRASH, Outcome.TIMEOUT)  # failures that may be deterministic
REPEATS = 2  # the same failure this many times: not launched again
MAX_CHARS = 300
# "stalled at loading weights 39% (25/64 shards): no output for 600 s ...": the phase alone.
_STALLED = re.compile(r"^stalled at (?P<phase>.+?)(?: \d+% \([^)]*\))?: no output for ")

_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b(?::.*)?$")
_TIMESTAMP = re.compile(r"^\[[^\]]*\]\s*")
_VOLATILE = (  # what differs between two runs of one failure; integers like `topk = 1` stay
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),  # addresses
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"), "<time>"),
    (re.compile(r"\b(pid|process)([ =:]+)\d+", re.IGNORECASE), r"\1\2<pid>"),
    (re.compile(r"\d+\.\d+"), "<n>"),  # durations, sizes, rates measured at the time
)


def normalise(line: str) -> str:
    """A log line without what differs between two runs of the same failure."""
    line = _TIMESTAMP.sub("", line.strip())
    for pattern, replacement in _VOLATILE:
        line = pattern.sub(replacement, line)
    return " ".join(line.split())[:MAX_CHARS]


def cause_line(log_excerpt: str | None, error: str | None) -> str:
    """The line that says why: a traceback's exception line, a fatal line, or the error."""
    lines = [ln.strip() for ln in (log_excerpt or "").splitlines() if ln.strip()]
    stripped = [_TIMESTAMP.sub("", ln) for ln in lines]
    for line in stripped:
        if _EXCEPTION.match(line):
            return line
    for line in stripped:
        if is_fatal_line(line):
            return line
    first = (error or "").splitlines()[0] if error else ""
    if stalled := _STALLED.match(first):
        return f"stalled at {stalled['phase']}"
    return first


def failure_signature(result: TrialResult) -> str | None:
    """`crash: ValueError: ...` for a crash or timeout; None for any other outcome."""
    if result.outcome not in FAILED:
        return None
    return f"{result.outcome}: {normalise(cause_line(result.log_excerpt, result.error))}"


def _failures(trials: list[FrozenTrial], key: str) -> Counter[str]:
    return Counter(
        t.user_attrs["failure"]
        for t in trials
        if t.user_attrs.get("candidate_key") == key
        and t.user_attrs.get("outcome") in FAILED
        and t.user_attrs.get("failure")
    )


def repeats_of(trials: list[FrozenTrial], key: str, signature: str) -> int:
    """How often the candidate `key` already failed with `signature`."""
    return _failures(trials, key)[signature]


def repeated_crash(trials: list[FrozenTrial], key: str) -> FrozenTrial | None:
    """The latest failure of candidate `key` that happened REPEATS times, or None."""
    counts = _failures(trials, key)
    known = {sig for sig, n in counts.items() if n >= REPEATS}
    matching = [
        t
        for t in trials
        if t.user_attrs.get("candidate_key") == key
        and t.user_attrs.get("failure") in known
        and t.user_attrs.get("outcome") in FAILED
    ]
    return max(matching, key=lambda t: t.number, default=None)
