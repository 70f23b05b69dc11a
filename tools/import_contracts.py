"""An import-linter contract that says "only": a package may import these parts of the project
and nothing else of it (`.importlinter`, docs/architecture.md).

import-linter's own `forbidden` contract is a deny-list: a module added later is allowed until
someone remembers to forbid it (the simulator's list missed 13 harness modules). This one names
what is allowed, so a new import from anywhere else breaks the contract the day it is written.

    [importlinter:contract:NAME]
    type = only_imports
    source_modules = harness.sim            # packages whose modules are checked (with children)
    allowed_modules = harness.sglang        # what they may import of `within` (with children)
    within = harness sweep analysis drafter # the project's packages the rule covers

A module may always import its own package's modules; packages outside `within` (the standard
library, FastAPI, ...) are not this contract's business. Imports are read directly, module by
module: an allowed module's own imports are its own contract's concern (harness.sglang has one
that allows nothing).
"""

from __future__ import annotations

from importlinter import Contract, ContractCheck, fields, output


def _inside(module: str, packages: list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


class OnlyImportsContract(Contract):
    type_name = "only_imports"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.ModuleField(), required=False, default=[])
    within = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        sources = [m.name for m in self.source_modules]
        allowed = [m.name for m in self.allowed_modules]
        within = [m.name for m in self.within]
        illegal = []
        for source in sources:
            for module in sorted({source, *graph.find_descendants(source)}):
                for imported in sorted(graph.find_modules_directly_imported_by(module)):
                    if not _inside(imported, within) or _inside(imported, [*sources, *allowed]):
                        continue
                    for detail in graph.get_import_details(importer=module, imported=imported):
                        illegal.append((module, imported, detail["line_number"]))
        return ContractCheck(kept=not illegal, metadata={"illegal": illegal, "allowed": allowed})

    def render_broken_contract(self, check: ContractCheck) -> None:
        allowed = ", ".join(check.metadata["allowed"]) or "nothing of the project"
        output.print_error(f"Allowed: {allowed}. Found:", bold=True)
        output.new_line()
        for module, imported, line in check.metadata["illegal"]:
            output.indent_cursor()
            output.print_error(f"{module} -> {imported} (l.{line})")
        output.new_line()
