"""The docs describe what the tool is and does now (DESIGN.md, Conventions): no issue numbers
(history lives in CHANGELOG.md and the commits), README short enough to read in one sitting, each
doc short enough to hold one idea, and every relative link pointing at a file that exists.

docs/results/ (written by the benchmarks) and docs/transcripts/ (written by tools/transcripts.py)
are generated: they carry dates and commands by design, so only their links are checked from the
hand-written docs that point at them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("results", "transcripts")

README_MAX_LINES = 200
DOC_MAX_LINES = 400

# An issue reference: a bare `#47` (not `owner/repo#47`, not a colour such as `#1f77b4`, not a
# shell comment `# 1`), or `issue 47` / `issues 28 and 31` / `PR #5`. A citation of another
# project's tracker is written `sgl-project/sglang#5029`, which names where the number lives.
ISSUE_REF = re.compile(r"(?<![\w/.#-])#\d+\b|\b(?:issues?|PR)\s+#?\d+\b", re.IGNORECASE)

# [text](target) and ![alt](target); the target up to whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def hand_written_docs() -> list[Path]:
    docs = ROOT / "docs"
    written = (p for p in docs.rglob("*.md") if p.relative_to(docs).parts[0] not in GENERATED)
    return [*sorted(written), ROOT / "README.md"]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def issue_refs(text: str) -> list[str]:
    return [m.group(0) for m in ISSUE_REF.finditer(text)]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Re-run for issue 28 (2026-12-05).", ["issue 28"]),
        ("the arms as issues 31 describes", ["issues 31"]),
        ("fixed in #47, see", ["#47"]),
        ("(Issue #17 follow-up)", ["Issue #17"]),
        ("SGLang PR #27455 made it faster", ["PR #27455"]),
        ("reported upstream (sgl-project/sglang#5029)", []),
        ("color: #1f77b4; a shell comment # 1, 8", []),
        ("`#!/usr/bin/env bash` and `--flag #` in code", []),
    ],
)
def test_the_issue_pattern_tells_references_from_code(text: str, found: list[str]) -> None:
    assert issue_refs(text) == found


@pytest.mark.parametrize("path", hand_written_docs(), ids=_rel)
def test_no_doc_names_an_issue(path: Path) -> None:
    hits = [
        f"{_rel(path)}:{n}: {ref}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for ref in issue_refs(line)
    ]
    assert not hits, "issue numbers belong in CHANGELOG.md, not in docs:\n" + "\n".join(hits)


def test_readme_is_short() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


@pytest.mark.parametrize("path", hand_written_docs()[:-1], ids=_rel)
def test_each_doc_is_short(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= DOC_MAX_LINES, (
        f"{_rel(path)} has {lines} lines (at most {DOC_MAX_LINES}): split it where an idea ends"
    )


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # code blocks hold no links
    targets = (m.group(1) for m in LINK.finditer(text))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


@pytest.mark.parametrize("path", hand_written_docs(), ids=_rel)
def test_every_relative_link_points_at_a_file(path: Path) -> None:
    missing = [
        target
        for target in relative_links(path)
        if not (path.parent / target.split("#", 1)[0]).exists()
    ]
    assert not missing, f"{_rel(path)} links to files that do not exist: {missing}"


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("")
    doc.write_text("[ok](b.md#x) [web](https://x.org) [gone](c.md) ![img](img/d.png)\n")
    assert relative_links(doc) == ["b.md#x", "c.md", "img/d.png"]
