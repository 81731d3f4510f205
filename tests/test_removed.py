"""tests/_removed.py: a test of a module some jax release removed is skipped only where that module is absent."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import _removed

ROOT = Path(__file__).resolve().parents[1]


def test_a_module_that_imports_is_not_missing() -> None:
    assert _removed.missing("jax.experimental.pallas") is None


def test_an_absent_module_is_missing_with_the_release_that_removed_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for absent in ("jax.experimental.no_such_module", "no_such_package.module"):  # the module, or a package above it
        monkeypatch.setitem(_removed.REMOVED_IN, absent, "jax 9.9")
        assert _removed.missing.__wrapped__(absent) == (
            f"the installed jax has no {absent} (jax 9.9 removed it); `nox -s previous` runs it"
        )


def test_a_module_that_is_there_and_fails_to_import_is_never_skipped(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "broken_module.py").write_text("import no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency"):
        _removed.missing.__wrapped__("broken_module")


def _previous_targets() -> set[str]:
    """The files of noxfile.py's REMOVED_MODULE_TESTS (`nox -s previous` runs them)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    assigned = {ast.unparse(n.targets[0]): n.value for n in tree.body if isinstance(n, ast.Assign)}
    return {target.split("::")[0] for target in ast.literal_eval(assigned["REMOVED_MODULE_TESTS"])}


def test_every_test_file_that_skips_for_a_removed_module_runs_in_the_previous_session() -> None:
    # A test skipped on the default and left out of `nox -s previous` would run nowhere.
    users = {
        f"tests/{p.name}"
        for p in (ROOT / "tests").glob("test_*.py")
        if p.name != Path(__file__).name and re.search(r"_removed\.(needs|require)\(", p.read_text())
    }
    assert users and users <= _previous_targets(), sorted(users - _previous_targets())
