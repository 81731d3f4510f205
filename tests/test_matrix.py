"""The version matrix declaration: parses, one line per cell, covers what the issue asks."""

from __future__ import annotations

import pytest

from harness import matrix


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def test_declared_matrix_parses_one_cell_per_line() -> None:
    lines = [ln for ln in matrix.MATRIX.splitlines() if ln.split("#", 1)[0].strip()]
    assert len(matrix.CELLS) == len(lines)
    assert len({c.name for c in matrix.CELLS}) == len(matrix.CELLS)


def test_matrix_spans_five_jax_releases_and_two_torch_versions() -> None:
    jaxes = sorted({c.jax for c in matrix.CELLS}, key=_key)
    assert len(jaxes) >= 5
    assert jaxes[0] == "0.7.0"  # the oldest release with pltpu.force_tpu_interpret_mode
    assert len({c.torch for c in matrix.CELLS if c.torch}) >= 2
    for cell in matrix.CELLS:
        if _key(cell.jax) >= (0, 11):
            assert _key(cell.python) >= (3, 12), f"{cell.name}: jax>=0.11 needs Python 3.12"


def test_adding_a_version_is_one_line() -> None:
    cells = matrix.parse(matrix.MATRIX + "3.12      0.13.0    0.0.60.*   -\n")
    assert len(cells) == len(matrix.CELLS) + 1
    assert cells[-1].pins() == ["jax==0.13.0", "jaxlib==0.13.0", "libtpu==0.0.60.*"]


def test_cell_constraints_replace_the_default_pins() -> None:
    cell = matrix.Cell("3.11", "0.7.0", "0.0.19.*", "2.13.0")
    text = cell.constraints("jax==0.10.2\njaxlib==0.10.2\nnumpy==2.4.6\ntorch==2.13.0\n")
    assert text.splitlines() == ["numpy==2.4.6", "jax==0.7.0", "jaxlib==0.7.0", "libtpu==0.0.19.*", "torch==2.13.0"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        pytest.param("3.11 0.7.0 0.0.19.*", "expected 4 columns", id="missing-column"),
        pytest.param("3 0.7.0 0.0.19.* -", "must be MAJOR.MINOR", id="bad-python"),
        pytest.param("3.11 0.7.0 0.0.19.* -\n3.11 0.7.0 0.0.19.* -", "declared twice", id="duplicate"),
    ],
)
def test_bad_lines_name_the_problem(line: str, message: str) -> None:
    with pytest.raises(matrix.MatrixError, match=message):
        matrix.parse(line)
