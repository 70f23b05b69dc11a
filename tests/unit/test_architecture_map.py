"""docs/architecture.md's map, the packages' own module lists and the import contracts, checked
against the code: a map that drifts from the house is worse than none.

- Every package's `__init__` docstring lists exactly its modules and subpackages (a line per
  part: its name, two or more spaces, what it holds). That list is the map's detail.
- docs/architecture.md names every package, and every path and module it names exists.
- The "only" contracts (tools/import_contracts.py) hold on the project and break, naming the
  import, when what they allow is narrowed: they can fail.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp
import pytest

from tools.import_contracts import OnlyImportsContract

ROOT = Path(__file__).resolve().parents[2]
TOP = ("specsweep", "harness", "sweep", "analysis", "drafter")
LISTED = re.compile(r"^(\w+)(?:\s{2,}|$)")


def packages() -> list[Path]:
    return sorted(
        d
        for top in TOP
        for d in [ROOT / top, *(ROOT / top).rglob("*")]
        if d.is_dir() and (d / "__init__.py").exists()
    )


def parts(package: Path) -> set[str]:
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    subpackages = {d.name for d in package.iterdir() if (d / "__init__.py").exists()}
    data = {d.name for d in package.iterdir() if d.is_dir() and d.name in ("data", "notebooks")}
    return modules | subpackages | data


def listed(package: Path) -> set[str]:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    names = {m.group(1) for line in doc.splitlines() if (m := LISTED.match(line))}
    return names - {"__init__"}


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_package_lists_exactly_its_modules(package: Path):
    have, says = parts(package), listed(package)
    assert says == have, (
        f"{package.relative_to(ROOT)}/__init__.py: missing {sorted(have - says)}, "
        f"no such module {sorted(says - have)}"
    )


def test_the_architecture_doc_names_every_package_and_only_what_exists():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for package in packages():
        name = str(package.relative_to(ROOT)) + "/"
        assert name in doc or f"`{package.name}/`" in doc, f"docs/architecture.md omits {name}"
    for path in re.findall(r"`((?:specsweep|harness|sweep|analysis|drafter)/[\w/]+\.py)`", doc):
        assert (ROOT / path).exists(), f"docs/architecture.md names {path}, which does not exist"
    for dotted in re.findall(r"`((?:harness|sweep|analysis|drafter|specsweep)(?:\.\w+)+)`", doc):
        assert names_something(dotted), f"docs/architecture.md names {dotted}, which is not there"


def names_something(dotted: str) -> bool:
    """A package, a module, or a module and a name it defines (`harness.trial.run_trial`)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:cut])
        if path.is_dir() or path.with_suffix(".py").exists():
            rest = parts[cut:]
            if not rest:
                return True
            source = path.with_suffix(".py").read_text() if not path.is_dir() else ""
            return re.search(rf"^(def|class) {rest[0]}\b|^{rest[0]}\b.*=", source, re.M) is not None
    return False


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(*TOP, include_external_packages=True)


def contract(source: str, allowed: list[str]) -> OnlyImportsContract:
    return OnlyImportsContract(
        name="test",
        session_options={},
        contract_options={
            "source_modules": [source],
            "allowed_modules": allowed,
            "within": list(TOP),
        },
    )


def test_the_simulator_imports_only_sglangs_facts_and_the_drafter_reader(graph):
    allowed = ["harness.sglang", "drafter.checkpoint", "drafter.checks"]
    assert contract("harness.sim", allowed).check(graph, verbose=False).kept


def test_an_only_contract_breaks_and_names_the_import_it_does_not_allow(graph):
    check = contract("harness.sim", ["harness.sglang"]).check(graph, verbose=False)
    assert not check.kept
    importers = {(module, imported) for module, imported, _ in check.metadata["illegal"]}
    assert ("harness.sim.oracle", "drafter.checkpoint") in importers
    assert all(imported.startswith("drafter.") for _, imported in importers)


def test_analysis_reads_only_the_records(graph):
    assert contract("analysis", ["harness.record"]).check(graph, verbose=False).kept
    assert not contract("analysis", []).check(graph, verbose=False).kept
