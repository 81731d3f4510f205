"""tests/mutation/check.py: the verdict of `nox -s mutation` from mutmut's results and the equivalents list."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutation import check

M = "harness.core.compare.x_f__mutmut_"


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
