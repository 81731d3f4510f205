"""The README's kernel table against the code: one row per implementation the code defines, and every
column read from that implementation's declarations, so the two cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core import contract
from harness.core.case import DTYPES, Case
from harness.core.masks import MASK_COMPONENTS
from tests.test_coverage import every_implementation

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Kernels and oracles"
COLUMNS = (
    "implementation",
    "role",
    "dtypes",
    "mask components",
    "bias",
    "GQA",
    "block sizes searched",
    "rows with no visible key",
)
SHORT_DTYPES = {"f64": "float64", "f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def kernel_table(text: str) -> dict[str, dict[str, str]]:
    """The first table under SECTION: implementation name (its first `code` span) -> column -> cell."""
    rows: list[list[str]] = []
    for ln in text.split(SECTION, 1)[1].splitlines():
        if ln.startswith("|"):
            rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
        elif rows:
            break  # the end of the first table
    header, _, *data = rows
    assert tuple(header) == COLUMNS, f"README kernel table columns {header}; this test reads {COLUMNS}"
    table = {}
    for cells in data:
        name = re.match(r"`([^`]+)`", cells[0])
        assert name, f"README kernel table row {cells[0]!r}: the first column must start with the `name`"
        assert name[1] not in table, f"README kernel table lists {name[1]} twice"
        table[name[1]] = dict(zip(COLUMNS, cells, strict=True))
    return table


TABLE = kernel_table(README.read_text())
IMPLS = {impl.name: impl for impl in every_implementation()}


def test_the_table_lists_every_implementation_the_code_defines_and_no_other() -> None:
    assert sorted(TABLE) == sorted(IMPLS)


def _dtypes(cell: str) -> set[str]:
    # The declared dtypes come first; a note after "(" or ";" qualifies them.
    head = re.split(r"[(;]", cell, maxsplit=1)[0]
    named = {SHORT_DTYPES[t] for t in re.findall(r"\b(?:f64|f32|bf16|f16)\b", head)}
    return named | (set(DTYPES) if head.startswith("all") else set())


def _components(cell: str) -> set[str]:
    if cell.startswith("all"):
        return set(MASK_COMPONENTS)
    return {c for c in MASK_COMPONENTS if re.search(rf"(?<![\w]){c}(?![\w])", cell)}


def _overrides_block_strategy(impl: contract.Implementation) -> bool:
    """Whether the implementation searches tile sizes: its block strategy on its smallest declared shape."""
    caps = impl.capabilities
    q_len = caps.q_lens[0] if caps.q_lens else min(caps.seq_lens)
    kv_len = max(q_len, min(caps.seq_lens))
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=q_len, kv_len=kv_len, head_dim=caps.head_dims[0])
    return impl.block_strategy(case) is not None


@pytest.mark.parametrize("name", sorted(TABLE))
def test_each_column_says_what_the_implementation_declares(name: str) -> None:
    row, impl = TABLE[name], IMPLS.get(name)
    if impl is None:
        pytest.skip(f"{name} is not defined in this environment")
    caps, conv = impl.capabilities, impl.conventions
    assert row["role"].split(",")[0].split()[0] == impl.role
    assert ("forward only" in row["role"]) == (not caps.grads), f"{name}: grads={caps.grads}"
    assert _dtypes(row["dtypes"]) == set(caps.dtypes)
    assert _components(row["mask components"]) == set(caps.mask_components) & MASK_COMPONENTS
    has_bias = "bias" in caps.mask_components
    assert row["bias"].startswith("none") == (not has_bias), f"{name}: bias {'is' if has_bias else 'is not'} declared"
    if has_bias:
        assert ("no dbias" in row["bias"]) == (not caps.dbias), f"{name}: dbias={caps.dbias}"
    assert row["GQA"].startswith("native") == conv.gqa.startswith("native"), f"{name}: gqa {conv.gqa!r}"
    assert (row["block sizes searched"] == "none") == (not _overrides_block_strategy(impl))
    assert re.split(r"[\s;:,(]", row["rows with no visible key"])[0] == conv.empty_rows
