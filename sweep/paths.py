"""Where the project's own files are, for the modules that read them (one place, not one per file).

The checkout root holds conf/ (Hydra's config groups), tests/compat/stubs (the import stub the
SGLang compat checks need) and sweep.py (what a placed worker runs).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
COMPAT_STUBS = ROOT / "tests" / "compat" / "stubs"
