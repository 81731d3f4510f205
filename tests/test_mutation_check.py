"""tests/mutation/check.py: the verdict of `nox -s mutation` from mutmut's results and the equivalents list."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mutation import check

M = "harness.core.compare.x_f__mutmut_"
ROOT = Path(__file__).parents[1]


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]):  # noqa: ANN201
    """judge(results, equivalent names, *argv) -> (exit code, output), without running mutmut."""

    def run(results: dict[str, str], equivalent: list[str], *argv: str) -> tuple[int, str]:
        doc = tmp_path / "equivalent.md"
        doc.write_text("# Equivalents\n\n" + "".join(f"- `{n}`: behaves as the original.\n" for n in equivalent))
        monkeypatch.setattr(check, "EQUIVALENT", doc)
        monkeypatch.setattr(check, "verdicts", lambda: dict(results))
        code = check.main(list(argv))
        return code, capsys.readouterr().out

    return run


def _killed(n: int) -> dict[str, str]:
    return {f"{M}{i}": "killed" for i in range(1, n + 1)}


def test_every_survivor_documented_and_enough_killed_passes(judge) -> None:
    code, out = judge({**_killed(9), f"{M}10": "survived"}, [f"{M}10"])
    assert code == 0, out
    assert "kill rate 100.0% (9 of 9 non-equivalent)" in out


@pytest.mark.parametrize(
    ("results", "equivalent", "says"),
    [
        pytest.param({**_killed(9), f"{M}10": "survived"}, [], f"UNDOCUMENTED SURVIVOR {M}10", id="undocumented"),
        pytest.param(_killed(9), [f"{M}99"], f"STALE {M}99: documented as equivalent but no longer", id="renumbered"),
        pytest.param(_killed(9), [f"{M}3"], f"STALE {M}3: documented as equivalent but killed", id="now-killed"),
        pytest.param({**_killed(9), f"{M}10": "not checked"}, [], "1 mutants not checked", id="stopped-early"),
    ],
)
def test_what_fails_the_session(judge, results: dict[str, str], equivalent: list[str], says: str) -> None:
    code, out = judge(results, equivalent)
    assert code == 1 and says in out, out


def test_a_timeout_counts_as_killed_and_the_rate_is_over_the_non_equivalent(judge) -> None:
    results = {**_killed(8), f"{M}9": "survived", f"{M}10": "timeout"}
    code, out = judge(results, [f"{M}9"], "--min-kill", "1.0")
    assert code == 0 and "kill rate 100.0% (9 of 9 non-equivalent), 90.0% of all" in out, out
    code, out = judge({**results, f"{M}11": "survived"}, [f"{M}9"], "--min-kill", "0.95")
    assert code == 1 and "kill rate 90.0% is below --min-kill 95%" in out, out


PREFLIGHT = """
import sys
from pathlib import Path
from tests.mutation import check
for name in sys.argv[1:]:
    print("exit", check.preflight(Path(name)))
"""


def test_preflight_fails_on_project_code_and_on_a_started_backend(tmp_path: Path) -> None:
    # In a fresh interpreter (this one has run JAX): what mutmut's fork server would import.
    (tmp_path / "starts_backend.py").write_text("import jax\n\njax.devices()\n")
    lists = {"clean": "json\n# a comment\n", "project": "harness.core.errors\n", "backend": "starts_backend\n"}
    for name, text in lists.items():
        (tmp_path / f"{name}.txt").write_text(text)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    files = [str(tmp_path / f"{name}.txt") for name in lists]
    out = subprocess.run([sys.executable, "-c", PREFLIGHT, *files], env=env, capture_output=True, text=True, check=True)
    (clean, c0), (project, c1), (backend, c2) = re.findall(r"(.*?)exit (\d)\n", out.stdout, re.DOTALL)
    assert c0 == "0" and "clean.txt starts no JAX backend and imports no project code" in clean
    assert c1 == "1" and "project code imported: harness" in project and "backend" not in project
    assert c2 == "1" and "a JAX backend started: ['cpu']" in backend
