"""Records docs/transcripts/: real commands run as a user runs them, from the checkout with the
virtualenv not on PATH (what `make sweep` leaves a shell with), into a scratch results folder,
and their console as printed. Every number in them is SIMULATED.

    python tools/transcripts.py [--only NAME] [--scratch DIR]

one-study-per-setup   `make sweep`, then `specsweep sweep hardware=8x_h200`: its own study
resume-and-deploy     `make sweep` stopped with Ctrl-C during its third trial, the resume line it
                      printed, then the Deploy line's Next (re-measure and export), as printed

A transcript keeps every line the console printed (one per trial: the sweep's default).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "transcripts"
SHELL = {**os.environ, "PATH": "/usr/bin:/bin", "COLUMNS": "120"}


def run(command: str) -> str:
    proc = subprocess.run(
        command, shell=True, cwd=ROOT, env=SHELL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=1800,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{command} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return proc.stdout


def interrupted(command: str, results: Path, trial: str) -> str:
    """`command` as a terminal's foreground job, Ctrl-C (SIGINT to its group) once `trial`'s
    server is measuring."""
    proc = subprocess.Popen(
        command, shell=True, cwd=ROOT, env=SHELL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
        # a terminal's default disposition: started from a background job, SIGINT is inherited
        # ignored, and a Python started so keeps ignoring it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 900
    while not any(
        "fired up" in log.read_text(errors="replace")
        for log in results.glob(f"*/{trial}/server.log")
    ):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{command}: {trial} never started")
        time.sleep(0.2)
    time.sleep(2.0)  # into its runs
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=300)
    return out


def as_printed(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines())


def after(text: str, pattern: str) -> str:
    found = re.search(pattern, text, re.M)
    if not found:
        raise SystemExit(f"no line matching {pattern!r} in:\n{text[-3000:]}")
    return found.group(1).strip()


def header(title: str, scratch: Path) -> list[str]:
    return [
        f"# Transcript: {title}",
        "",
        f"Recorded by `python tools/transcripts.py` on {date.today():%Y-%m-%d} on a "
        f"{os.cpu_count()}-core machine without a GPU, from the checkout with the virtualenv "
        f"not on PATH (as `make sweep` leaves a shell), results in `{scratch}`. Every number is "
        "**SIMULATED** (engine=sim): the simulator's model of the deployment, not a hardware "
        "measurement.",
        "",
    ]


def section(title: str, command: str, text: str, note: str) -> list[str]:
    return [f"## {title}", "", f"`{command}`", "", note, "", "```", as_printed(text), "```", ""]


def one_study_per_setup(scratch: Path) -> str:
    first = f"make sweep ARGS=tracking.dir={scratch}"
    quickstart = run(first)
    second = f".venv/bin/specsweep sweep hardware=8x_h200 tracking.dir={scratch}"
    h200 = run(second)
    studies = sorted(p.parent.name for p in scratch.glob("*/setup.json"))
    return "\n".join(
        [
            *header("one study per setup: the quickstart, then another box", scratch),
            "The quickstart's study and the H200 sweep's are two, each with its own baseline, "
            f"trials and answer: {' and '.join(f'`{s}`' for s in studies)} under the results "
            'folder (docs/configuration.md, "One study per setup").',
            "",
            *section(
                "1. The quickstart",
                first,
                quickstart,
                "The simulated reference deployment (Kimi-K2.5, TP 8 on 8x RTX PRO 6000 over "
                "PCIe). Its study is named from its setup.",
            ),
            *section(
                "2. The same sweep on another box",
                second,
                h200,
                "A study of its own, named from the box (`8x-h200`): its own baseline measured, "
                "no trial of the first study in its table, its own answer.",
            ),
        ]
    )


def resume_and_deploy(scratch: Path) -> str:
    first = f"make sweep ARGS=tracking.dir={scratch}"
    stopped = interrupted(first, scratch, "trial_0002")
    resume = after(stopped, r"^To resume: (.*?)   \(")
    resumed = run(resume)
    reproduce = after(resumed, r"^  Next: (.*?)   \(")
    exported = run(reproduce)
    return "\n".join(
        [
            *header("the default sweep, interrupted, resumed and exported", scratch),
            *section(
                "1. Ctrl-C during the third trial",
                first,
                stopped,
                "The server is stopped and what was measured kept; there is no answer yet, so "
                "`No recommendation` stands where the Deploy line would, with the resume line "
                "straight under it (exit 130, no traceback).",
            ),
            *section(
                "2. The resume line, as printed",
                resume,
                resumed,
                "The same study: the baseline reused, the interrupted trial run again, the search "
                "on until its answer is settled, then the study's answer over all its trials.",
            ),
            *section(
                "3. The Next line, as printed",
                reproduce,
                exported,
                "Re-measures the answer and writes the launch command, the systemd unit and "
                'deployment.json (docs/reproduce.md, "Reproduce the answer").',
            ),
        ]
    )


RECORDS = {"one-study-per-setup": one_study_per_setup, "resume-and-deploy": resume_and_deploy}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/transcripts.py", description=__doc__)
    parser.add_argument("--only", choices=sorted(RECORDS))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/specsweep-transcript"))
    args = parser.parse_args(argv)
    for name, record in RECORDS.items():
        if args.only not in (None, name):
            continue
        scratch = args.scratch / name
        shutil.rmtree(scratch, ignore_errors=True)
        text = record(scratch)
        (OUT / f"{name}.md").write_text(text + "\n")
        print(f"wrote {OUT / f'{name}.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
