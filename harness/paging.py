"""A paged KV cache built from a case: the page table, and the dense K/V scattered into a page pool.

The oracles never see pages: they compute the truth from the dense K/V (harness.inputs)
and the case's valid lengths (harness.masks.Lengths). A paged kernel's adapter builds
the pool here, so every paged kernel is fed by the same, independent code.

The page table is never the identity. Each sequence's pages sit at places drawn from a
permutation of the pool (seeded by the case), and the pool holds spare pages nobody uses.
Table entries past a sequence's last page point at pages of other sequences or at spare
pages (shared pages, as a serving system leaves them), and every slot not written from the
case holds finite noise, so a kernel that reads the wrong page, or past a length, sees
values that change its answer.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.case import Case

# Salt for the page-table generator: not the inputs' stream (harness.inputs uses case.seed).
_TABLE_SALT = 0x9A6E


@dataclasses.dataclass(frozen=True, kw_only=True)
class PageTable:
    """Where each sequence's pages live in the pool.

    indices: int32 [batch, pages_per_sequence], entries in [0, pool_pages).
    used: pages holding each sequence's valid keys (ceil(length / page_size)).
    """

    page_size: int
    pool_pages: int
    indices: np.ndarray
    used: tuple[int, ...]

    @property
    def pages_per_sequence(self) -> int:
        return self.indices.shape[1]


def kv_ends(case: Case) -> tuple[int, ...]:
    """Each batch row's valid key length (the case's kv lengths, else kv_len)."""
    lengths = case.mask.lengths
    if lengths is None or lengths.kv is None:
        return (case.kv_len,) * case.batch
    return lengths.kv


def page_table(case: Case, *, page_size: int, spare_pages: int, pages_per_sequence: int | None = None) -> PageTable:
    """The case's page table: a seeded, non-identity placement of every used page in a pool
    of (used pages + spare_pages), unused table entries pointing at arbitrary pool pages.

    pages_per_sequence: the table width (default ceil(kv_len / page_size)).
    """
    if page_size < 1 or spare_pages < 0:
        raise ValueError(f"{page_size=} must be >= 1 and {spare_pages=} >= 0")
    width = pages_per_sequence or -(-case.kv_len // page_size)
    if width * page_size < case.kv_len:
        raise ValueError(f"{pages_per_sequence=} pages of {page_size=} cannot hold kv_len={case.kv_len}")
    used = tuple(-(-n // page_size) for n in kv_ends(case))
    pool = sum(used) + spare_pages
    rng = np.random.default_rng([case.seed, _TABLE_SALT])
    places = rng.permutation(pool)
    if pool > 1 and (places[: sum(used)] == np.arange(sum(used))).all():
        places = np.roll(places, 1)  # never the identity: a kernel that ignores the table must fail
    # Unused entries: any pool page (another sequence's, a spare, or the first page of the pool).
    indices = rng.integers(0, max(pool, 1), size=(case.batch, width))
    start = 0
    for b, n in enumerate(used):
        indices[b, :n] = places[start : start + n]
        start += n
    return PageTable(page_size=page_size, pool_pages=max(pool, 1), indices=indices.astype(np.int32), used=used)


def scatter(x: np.ndarray, table: PageTable, *, seed: int) -> np.ndarray:
    """Dense keys or values [batch, kv_heads, kv_len, head_dim] as a pool [kv_heads, pool, page_size, head_dim].

    Every valid key's row is copied to its page; every other slot holds finite noise drawn from
    `seed`, in x's dtype (int8 codes stay int8).
    """
    batch, heads, length, dim = x.shape
    rng = np.random.default_rng([seed, _TABLE_SALT, 1])
    shape = (heads, table.pool_pages, table.page_size, dim)
    if np.issubdtype(x.dtype, np.integer):
        pool = rng.integers(-127, 128, size=shape).astype(x.dtype)
    else:
        pool = rng.standard_normal(shape).astype(x.dtype)
    for b in range(batch):
        for p in range(table.used[b]):
            rows = x[b, :, p * table.page_size : (p + 1) * table.page_size]
            pool[:, table.indices[b, p], : rows.shape[1]] = rows
    return pool
