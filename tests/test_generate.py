"""docs/generate.py: the generated documentation is current, and --check says which part is stale."""

from __future__ import annotations

import pytest

from docs import generate
from harness.core import contract


def test_the_kernel_table_is_current() -> None:
    # The table is the declarations of every implementation the code defines; one missing here would drop its row.
    if contract.unavailable():
        pytest.skip(f"modules cannot be imported here: {contract.unavailable()}")
    page = generate.KERNELS_PAGE
    assert generate.parts()[page] == page.read_text(), "docs/kernels.md is stale: run `python -m docs.generate`"


def test_the_table_has_one_row_per_implementation_with_every_column() -> None:
    table = generate.kernel_table(contract.defined().values()).splitlines()
    header, _, *rows = table
    assert header.count("|") == len(generate.COLUMNS) + 1
    assert [r.split("|")[1].split("`")[1] for r in rows[:1]] == ["jax_cudnn"]  # kernels first, by name
    assert len(rows) == len(contract.defined())
    assert all(r.count("|") - r.count("\\|") == len(generate.COLUMNS) + 1 for r in rows)


@pytest.fixture
def page(tmp_path, monkeypatch):
    path = tmp_path / "docs" / "kernels.md"
    path.parent.mkdir()
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    monkeypatch.setattr(generate, "KERNELS_PAGE", path)
    return path


def test_check_names_a_stale_page_and_writing_makes_it_current(page, capsys) -> None:
    if contract.unavailable():
        pytest.skip(f"modules cannot be imported here: {contract.unavailable()}")
    tail = f"{generate.RESTRICTIONS_BEGIN}\n{generate.RESTRICTIONS_END}\n"
    page.write_text(f"# Kernels\n\n{generate.BEGIN}\n| old |\n{generate.END}\n\nafter\n{tail}")
    assert generate.main(["--check"]) == 1
    assert "docs/kernels.md: its generated tables are stale" in capsys.readouterr().err
    assert "| old |" in page.read_text()  # --check writes nothing
    assert generate.main([]) == 0
    text = page.read_text()
    assert text.startswith("# Kernels\n\n") and f"{generate.END}\n\nafter\n" in text and "`pallas_flash`" in text
    assert "| `pallas_flash` | violations | block_k a multiple of 128 | upstream " in text
    assert generate.main(["--check"]) == 0


def test_a_page_without_its_markers_is_a_usage_error(page, capsys) -> None:
    if contract.unavailable():
        pytest.skip(f"modules cannot be imported here: {contract.unavailable()}")
    page.write_text(f"# Kernels\n{generate.END}\n{generate.BEGIN}\n")
    assert generate.main(["--check"]) == 2
    assert "expected one '<!-- kernels:begin -->' before one '<!-- kernels:end -->'" in capsys.readouterr().err
