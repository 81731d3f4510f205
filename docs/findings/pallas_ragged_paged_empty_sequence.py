"""ragged_paged_attention computes the sequence after an empty one (kv_len 0) with the empty sequence's page.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_ragged_paged_empty_sequence.py [--fixed]
Imports jax, numpy and the standard library, and off a TPU the repository's interpreter fix
(kernels/_tpu_interpret_fix.py, found from this file's place), without which the TPU interpret mode cannot
run the kernel on jax 0.10.2 (docs/findings/pallas_ragged_paged_interpreter.md). On a TPU it runs the
kernel natively. About a minute on a CPU.

Three sequences, float32, 2 query and 2 KV heads, head_dim 128, 16-key pages (two per sequence, a shuffled
page table), one page per kv block, 16 queries per block. Each call is compared, sequence by sequence,
with upstream's ref_ragged_paged_attention; the sequence after the empty one is also compared with that
reference given the empty sequence's first page in place of its own (the stale-fetch explanation).
Exits 1 while a call with an empty sequence is wrong, 0 once every call agrees, 4 when it cannot run here.

--fixed runs the kernel with the one-line fix of docs/findings/fixes/ragged_empty_sequence.py (the kv loop
runs at least once), applied here to the installed source: every call then agrees.
"""

import inspect
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa

EXIT_CANNOT_RUN = 4
# float32 throughout: where the kernel is right it agrees with the reference to ~2e-7.
TOLERANCE = 1e-4
PAGE_SIZE, PAGES_PER_SEQ, HEADS, HEAD_DIM, TOKENS = 16, 2, 2, 128, 24
CALLS = [  # (what, q_lens, kv_lens, index of the sequence after the empty one or None)
    ("empty first sequence", (0, 1, 15), (0, 1, 15), 1),
    ("empty middle sequence", (2, 0, 3), (5, 0, 9), 2),
    ("control: no queries but 1 key", (0, 1, 15), (1, 1, 15), None),
]

on_tpu = jax.default_backend() == "tpu"
if not on_tpu:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    try:
        from kernels import _tpu_interpret_fix
    except ImportError as e:
        print(f"cannot run here: the repository's interpreter fix does not import ({e})")
        sys.exit(EXIT_CANNOT_RUN)
    status = _tpu_interpret_fix.ensure()
    if status.error is not None:
        print(f"cannot run here: the TPU interpret mode cannot run the kernel: {status.error}")
        sys.exit(EXIT_CANNOT_RUN)

kernel = rpa.ragged_paged_attention
if "--fixed" in sys.argv[1:]:
    source = inspect.getsource(rpa)
    old = "      return kv_blk_idx * num_kv_per_blk < kv_len\n"
    if source.count(old) != 1:
        print("cannot run here: --fixed: the kernel's kv-loop condition is not where the fix expects it")
        sys.exit(EXIT_CANNOT_RUN)
    namespace = {"__name__": "ragged_paged_attention_fixed"}
    fixed_source = source.replace(old, old.replace("< kv_len", "< jnp.maximum(kv_len, 1)"))
    exec(compile(fixed_source, "<fixed>", "exec"), namespace)
    kernel = namespace["ragged_paged_attention"]

rng = np.random.default_rng(0)
q = jnp.asarray(rng.standard_normal((TOKENS, HEADS, HEAD_DIM)), jnp.float32)
# [pages, page_size, 2 * kv_heads (k and v interleaved), head_dim]; one spare page.
kv_pages = jnp.asarray(rng.standard_normal((3 * PAGES_PER_SEQ + 1, PAGE_SIZE, 2 * HEADS, HEAD_DIM)), jnp.float32)
page_indices = rng.permutation(3 * PAGES_PER_SEQ).astype(np.int32).reshape(3, PAGES_PER_SEQ)


def arguments(q_lens, kv_lens, table):
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    lengths = jnp.asarray(kv_lens, jnp.int32)
    return (q, kv_pages, lengths, jnp.asarray(table), jnp.asarray(cu), jnp.asarray([3], jnp.int32))


def per_sequence_error(out, want, q_lens):
    cu = np.concatenate([[0], np.cumsum(q_lens)])
    # The reference returns the real queries only; the kernel, every row of q.
    diff = np.abs(np.asarray(out)[: cu[-1]] - np.asarray(want))
    return [float(diff[a:b].max()) if b > a else None for a, b in zip(cu[:-1], cu[1:], strict=True)]


def shown(errors):
    return ", ".join("no queries" if e is None else f"{e:.1e}" for e in errors)


kw = {"sm_scale": HEAD_DIM**-0.5, "num_kv_pages_per_block": 1, "num_queries_per_block": 16}
print(f"jax {jax.__version__}, {'TPU' if on_tpu else 'TPU interpret mode on ' + jax.default_backend()}")
wrong = False
for what, q_lens, kv_lens, after in CALLS:
    args = arguments(q_lens, kv_lens, page_indices)
    try:
        if on_tpu:
            out = kernel(*args, **kw)
        else:
            with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
                out = kernel(*args, **kw)
    except Exception as e:  # noqa: BLE001 - a kernel that cannot run here is no measurement
        print(f"cannot run here: {type(e).__name__}: {str(e).strip().splitlines()[-1]}")
        sys.exit(EXIT_CANNOT_RUN)
    errors = per_sequence_error(out, rpa.ref_ragged_paged_attention(*args, sm_scale=kw["sm_scale"]), q_lens)
    print(
        f"{what}: q_lens {list(q_lens)}, kv_lens {list(kv_lens)}: "
        f"max |kernel - reference| per sequence: {shown(errors)}"
    )
    wrong |= any(e is not None and e > TOLERANCE for e in errors)
    if after is not None:
        # The empty sequence's fetch reads its page-table row's first page (its page range is empty, so the
        # descriptor falls back to page 0 of its row).
        stale = page_indices.copy()
        stale[after, 0] = page_indices[after - 1, 0]
        stale_args = arguments(q_lens, kv_lens, stale)
        against = per_sequence_error(out, rpa.ref_ragged_paged_attention(*stale_args, sm_scale=kw["sm_scale"]), q_lens)
        print(
            f"  sequence {after} against the reference given page {stale[after, 0]} (sequence {after - 1}'s) "
            f"as its first page: {against[after]:.1e}"
        )
print("shows" if wrong else "fixed: every sequence agrees with the reference")
sys.exit(1 if wrong else 0)
