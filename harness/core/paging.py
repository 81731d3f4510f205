"""A paged KV cache built from a case: the page table, and the dense K/V scattered into a page pool.

The oracles never see pages: they compute the truth from the dense K/V (harness.core.inputs)
and the case's valid lengths (harness.core.masks.Lengths). A paged kernel's adapter builds
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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.core.case import Case
from harness.runtime import compat, placement

# Salt for the page-table generator: not the inputs' stream (harness.core.inputs uses case.seed).
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


def gather(pool: np.ndarray, table: PageTable, *, row: int, length: int) -> np.ndarray:
    """Sequence `row`'s first `length` keys (or values) read back through its page table.

    pool: [kv_heads, pool_pages, page_size, head_dim] -> [kv_heads, length, head_dim].
    """
    pages = table.indices[row, : -(-length // table.page_size)]
    heads, _, _, dim = pool.shape
    return pool[:, pages].reshape(heads, -1, dim)[:, :length]


def visible_rows(
    *, q_lens: tuple[int, ...], kv_lens: tuple[int, ...], q_len: int, kv_len: int, window: int | None = None
) -> np.ndarray:
    """bool [batch, q_len, kv_len]: sequence b's q_lens[b] queries are the last positions of its
    kv_lens[b] keys, each seeing the keys at or before its own position, and with `window` only
    the last `window` of those (ragged_paged_attention's sliding_window: key j is hidden when
    position - window >= j). Padding queries see nothing. A decode batch has every q_lens[b] 1."""
    if window is not None and window < 1:
        raise ValueError(f"window={window} must be a positive number of keys, or None")
    rows = np.arange(q_len)[:, None]
    cols = np.arange(kv_len)[None, :]
    out = []
    for q, kv in zip(q_lens, kv_lens, strict=True):
        position = kv - q + rows
        vis = (rows < q) & (cols <= position) & (cols < kv)
        if window is not None:
            vis &= cols > position - window
        out.append(vis)
    return np.stack(out)


def attend(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, visible: np.ndarray, *, scale: float, cap: float | None = None
) -> np.ndarray:
    """softmax(cap * tanh(scale * QK^T / cap), masked) V from the definition, in q's dtype, on the
    reference device; returned as float64.

    q [batch, q_heads, q_len, d], k/v [batch, kv_heads, kv_len, d], visible bool [batch, q_len, kv_len].
    Rows that see no key are 0. In float64 from exact inputs this is the truth; in the case dtype
    the same-dtype ruler.
    """
    with compat.enable_x64():
        q, k, v, visible = jax.device_put((q, k, v, visible), placement.reference_device())
        dt = q.dtype
        group = q.shape[1] // k.shape[1]
        k, v = (jnp.repeat(a.astype(dt), group, axis=1) for a in (k, v))
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * jnp.asarray(scale, dt)
        if cap is not None:
            s = jnp.asarray(cap, dt) * jnp.tanh(s / jnp.asarray(cap, dt))
        vis = visible[:, None]
        s = jnp.where(vis, s, -jnp.inf)
        m = jnp.max(s, axis=-1, keepdims=True)
        p = jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0))
        denom = jnp.sum(p, axis=-1, keepdims=True)
        p = p / jnp.where(denom == 0, 1, denom)
        return np.asarray(jnp.einsum("bhqk,bhkd->bhqd", p, v), np.float64)


def gathered_truth(
    q: np.ndarray,
    k_pool: np.ndarray,
    v_pool: np.ndarray,
    table: PageTable,
    *,
    q_lens: tuple[int, ...],
    kv_lens: tuple[int, ...],
    scale: float,
    cap: float | None = None,
    window: int | None = None,
    dtype: Any = np.float64,
) -> np.ndarray:
    """Paged attention's answer from the pages themselves: each sequence's K/V gathered through
    its table (dequantized pools, [kv_heads, pool_pages, page_size, head_dim]), then `attend` in
    `dtype` (float64: the truth; the case dtype: the ruler). q: [batch, q_heads, q_len, head_dim]."""
    batch, _, q_len, _ = q.shape
    kv_len = table.pages_per_sequence * table.page_size
    dense = []
    for pool in (k_pool, v_pool):
        x = np.zeros((batch, pool.shape[0], kv_len, pool.shape[-1]), pool.dtype)
        for b, n in enumerate(kv_lens):
            x[b, :, :n] = gather(pool, table, row=b, length=n)
        dense.append(x.astype(dtype))
    visible = visible_rows(q_lens=q_lens, kv_lens=kv_lens, q_len=q_len, kv_len=kv_len, window=window)
    return attend(q.astype(dtype), dense[0], dense[1], visible, scale=scale, cap=cap)


def case_reference(
    case: Case,
    inputs: Any,
    *,
    page_size: int,
    spare_pages: int,
    q_lens: tuple[int, ...] | None = None,
    window: int | None = None,
    cap: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(float64 truth, case-dtype ruler) of a case's queries over the pool a paged adapter builds
    from it (the same table, the same scatter), gathered back: the oracle for decode features the
    dense reference does not model. q_lens default: one query per sequence (decode)."""
    table = page_table(case, page_size=page_size, spare_pages=spare_pages)
    pools = [scatter(a, table, seed=case.seed * 2 + i) for i, a in enumerate((inputs.k, inputs.v))]
    kw = {
        "q_lens": q_lens or (1,) * case.batch,
        "kv_lens": kv_ends(case),
        "scale": case.sm_scale,
        "cap": cap,
        "window": window,
    }
    truth = gathered_truth(inputs.q, *(p.astype(np.float64) for p in pools), table, **kw)
    return truth, gathered_truth(inputs.q, *pools, table, dtype=inputs.q.dtype, **kw)
