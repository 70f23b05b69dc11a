"""One preflight check's verdict, and how the console shows a list of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # pass | warn | fail
    message: str
    fix: str = ""


def render(checks: list[Check]) -> list[str]:
    mark = {"pass": "[green]pass[/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}
    lines = []
    for c in checks:
        line = f"  {mark[c.status]}  {c.name:<12} {c.message}"
        if c.fix and c.status != "pass":
            line += f" -> {c.fix}"
        lines.append(line)
    return lines
