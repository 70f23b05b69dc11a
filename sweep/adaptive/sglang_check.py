"""An adaptive config through SGLang's own loader: SGLang's environment as `make compat` builds it
(`compat_python`), its loader run there on a file (`validate_with_sglang`), and where its reading
differs from specsweep's (`disagreements`, against harness.sglang's reading: `expected_view`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from harness.sglang.adaptive import ADAPTIVE_KNOB_DEFAULTS, adaptive_slots
from sweep.paths import COMPAT_STUBS, ROOT


def compat_python() -> str | None:
    """SGLang's environment as `make compat` builds it (.venv-compat in the checkout, or in the
    main checkout of a git worktree), once its build finished: `make compat-env` writes
    `.venv-compat/.installed` last, so an environment still (or half) built is not taken for one
    that has SGLang."""
    roots = [ROOT]
    try:
        common = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        roots.append(Path(common).parent)
    except (OSError, subprocess.SubprocessError):
        pass
    for root in roots:
        python = root / ".venv-compat" / "bin" / "python"
        if python.is_file() and (root / ".venv-compat" / ".installed").is_file():
            return str(python)
    return None


# Runs in SGLang's environment: its own loader and policy on the file; what it made of it.
VALIDATE = r"""
import json, sys
from sglang.srt.speculative import adaptive_spec_params as a
path = sys.argv[1] if len(sys.argv) > 1 else None
steps = a.resolve_candidate_steps_from_config(path)
p = a.AdaptiveSpeculativeParams(initial_steps=steps[len(steps) // 2], cfg_path=path)
knobs = ("ema_alpha", "update_interval", "warmup_batches", "down_hysteresis", "up_hysteresis",
         "ceiling_coeff")
print(json.dumps({
    "candidate_steps": steps,
    "slots": {str(bs): {"candidate_steps": s.candidate_steps, "current_steps": s.current_steps,
                        **{k: getattr(s, k) for k in knobs}} for bs, s in p._slots.items()},
    "default": a.DEFAULT_ADAPTIVE_CONFIG,
}))
"""


def validate_with_sglang(python: str, path: Path | None) -> dict[str, Any]:
    """SGLang's loader (and AdaptiveSpeculativeParams) on `path` (None: its built-in default) in
    `python`'s environment. RuntimeError with SGLang's own error when it refuses the file."""
    argv = [python, "-c", VALIDATE, *([str(path)] if path else [])]
    env = {"PYTHONPATH": str(COMPAT_STUBS), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"SGLang's loader refuses {path}:\n{proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout)


def expected_view(config: dict[str, Any]) -> dict[str, Any]:
    """What SGLang's loader must make of `config`, by harness.sglang's reading of it."""
    slots = adaptive_slots(config)
    union = sorted({s for slot in slots.values() for s in slot["candidate_steps"]})
    start = union[len(union) // 2]
    out = {}
    for bs, slot in sorted(slots.items()):
        cands = sorted(set(slot["candidate_steps"]))
        knobs = {**ADAPTIVE_KNOB_DEFAULTS, **slot}
        out[str(bs)] = {
            "candidate_steps": cands,
            "current_steps": start if start in cands else cands[len(cands) // 2],
            **{k: knobs[k] for k in ADAPTIVE_KNOB_DEFAULTS},
        }
    return {"candidate_steps": union, "slots": out}


def disagreements(config: dict[str, Any], sglang_view: dict[str, Any]) -> list[str]:
    mine = expected_view(config)
    problems = []
    if mine["candidate_steps"] != sglang_view["candidate_steps"]:
        problems.append(
            f"candidate steps: SGLang {sglang_view['candidate_steps']}, specsweep "
            f"{mine['candidate_steps']}"
        )
    for bs, slot in mine["slots"].items():
        theirs = sglang_view["slots"].get(bs)
        for key, value in slot.items():
            if theirs is None or theirs.get(key) != value:
                got = None if theirs is None else theirs.get(key)
                problems.append(f"slot {bs} {key}: SGLang {got!r}, specsweep {value!r}")
    return problems
