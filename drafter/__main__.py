"""`python -m drafter check --drafter PATH [--model PATH] [--algorithm EAGLE3] [--deep]`."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from drafter.checkpoint import CheckpointError, TargetConfig
from drafter.checks import Finding, check
from drafter.deep import deep_check

MARK = {"ok": "ok  ", "warning": "warn", "error": "FAIL"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drafter")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="validate an EAGLE-3 drafter checkpoint against its target")
    p.add_argument("--drafter", type=Path, required=True, help="drafter checkpoint directory")
    p.add_argument("--model", type=Path, help="target model directory (its config.json)")
    p.add_argument("--algorithm", default="EAGLE3", help="--speculative-algorithm to be used")
    p.add_argument("--deep", action="store_true", help="also run one CPU forward pass (torch)")
    p.add_argument("--tp", type=int, default=8, help="TP size, for the per-rank footprint")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)

    report = check(args.drafter, args.model, args.algorithm)
    if args.deep and report.ok:
        target = None
        if args.model:
            try:
                target = TargetConfig.open(args.model)
            except CheckpointError:
                target = None
        report.findings += deep_check(args.drafter, target)
    elif args.deep:
        report.findings.append(Finding("warning", "deep", "skipped: fix the errors above first"))
    if args.json:
        print(
            json.dumps(
                {
                    "drafter": str(report.drafter),
                    "ok": report.ok,
                    "findings": [asdict(f) for f in report.findings],
                    "footprint": asdict(report.footprint) if report.footprint else None,
                }
            )
        )
        return 0 if report.ok else 1
    print(f"drafter {report.drafter}")
    for f in report.findings:
        print(f"  {MARK[f.level]}  {f.check:<10} {f.message}")
    if report.footprint:
        weights, kv = report.footprint.per_rank(args.tp)
        print(
            f"  footprint  weights {report.footprint.weights_bytes / 2**30:.2f} GiB "
            f"({weights / 2**20:.0f} MiB per rank at TP {args.tp}); KV "
            f"{report.footprint.kv_bytes_per_token} B/token ({kv:.0f} per rank)"
        )
    print("OK" if report.ok else f"{len(report.errors)} error(s): do not launch with this drafter")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
