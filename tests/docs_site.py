"""The documentation site for tests: its generators (docs/refgen) and a fresh build of it."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from processes import ROOT

DOCS = ROOT / "docs"


def refgen(module: str) -> ModuleType:
    """A module of docs/refgen, the reference pages' generators."""
    if str(DOCS) not in sys.path:
        sys.path.insert(0, str(DOCS))
    return importlib.import_module(f"refgen.{module}")


def build(site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of the site into `site`, as `make docs` runs it."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
