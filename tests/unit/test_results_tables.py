"""docs/results/<benchmark>.md: the table a benchmark prints, as markdown under its header."""

from __future__ import annotations

from rich.table import Table

from benchmarks import _common
from benchmarks._common import markdown_table, write_results


def table() -> Table:
    t = Table(title="Fault scenarios \\[SIMULATED]")
    t.add_column("scenario")
    t.add_column("survived", justify="right")
    t.add_row("a|b", "[red]NO[/red]")
    t.add_row("c", "yes")
    return t


def test_a_printed_table_becomes_markdown_with_its_text_as_the_console_shows_it():
    assert markdown_table(table()).splitlines() == [
        "### Fault scenarios [SIMULATED]",
        "",
        "| scenario | survived |",
        "|---|---:|",
        "| a\\|b | NO |",
        "| c | yes |",
    ]


def test_the_results_file_names_command_date_machine_and_simulated(tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "RESULTS", tmp_path)
    made = {"command": "python benchmarks/x.py --seeds 5", "date": "2026-12-06 05:00 UTC"}
    path = write_results("x", [table()], simulated=True, made={**made, "machine": "2 cores"})
    text = path.read_text()
    assert path == tmp_path / "x.md"
    assert text.startswith("# x (SIMULATED)\n")
    for line in ("- command: `python benchmarks/x.py --seeds 5`", "- date: 2026-12-06 05:00 UTC"):
        assert line in text.splitlines()
    assert "- machine: 2 cores" in text and "- SIMULATED: " in text
    assert "| c | yes |" in text


def test_the_smoke_form_writes_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "RESULTS", tmp_path)
    path = write_results("x", [table()], simulated=False, smoke=True)
    assert path.parent != tmp_path and path.name == "x.md"
    assert "SIMULATED" not in path.read_text().split("###")[0]
