"""One preflight check's verdict, and how the console shows a list of them."""

from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # pass | warn | fail
    message: str
    fix: str = ""


def render(checks: list[Check]) -> list[str]:
    """Console markup: the verdict is coloured, the texts escaped (a hint such as
    `pip install -e '.[sglang]'` would otherwise lose `[sglang]` to rich's markup)."""
    mark = {"pass": "[green]pass[/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}
    lines = []
    for c in checks:
        line = f"  {mark[c.status]}  {escape(f'{c.name:<12} {c.message}')}"
        if c.fix and c.status != "pass":
            line += f" -> {escape(c.fix)}"
        lines.append(line)
    return lines
