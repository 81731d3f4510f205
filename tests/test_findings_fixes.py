"""Every proof under docs/findings/fixes/ imports and builds its kernels: a proof that stops importing (a
changed adapter signature) fails the default suite, not only `nox -s findings`."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from harness import findings
from harness.core import contract

HERE = Path(findings.ROOT) / "docs" / "findings" / "fixes"
FIXES = sorted(p.stem for p in HERE.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", FIXES)
def test_every_fix_module_imports(name):
    importlib.import_module(f"docs.findings.fixes.{name}")


PROVEN = [f for f in findings.catalogue() if f.fix is not None and f.fix.fixed]


@pytest.mark.parametrize("finding", PROVEN, ids=lambda f: f.name)
def test_every_proven_fix_builds_its_kernels(finding):
    for spec in (finding.fix.fixed, finding.fix.unfixed):
        assert contract.resolve(spec).role == "kernel", spec
