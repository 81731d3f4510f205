"""The shrunk failing case of each fixed finding, written as a failure file by running the unfixed kernel.

    python -m docs.findings.fixes.cases NAME...   # writes docs/findings/fixes/NAME.json

Each file is an ordinary failure file (harness/running/failures.py): `python -m harness repro FILE`
replays it against the unfixed kernel (exit 1), and `--kernel FIXED` against the fix (exit 0).
Writing one fails (exit 1) when the unfixed kernel passes its case: the case shows nothing. A fix that is
not a kernel edit is left out by its note's [fix] unfixed_env, set when writing its case:

    ATTN_HARNESS_TPU_INTERPRET_FIX=off python -m docs.findings.fixes.cases ragged_interpreter
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.core import contract
from harness.core.case import Case
from harness.core.masks import BlockSparse, Lengths, Mask
from harness.running.failures import failure_document
from harness.running.runner import run_case
from harness.running.worker import default_time_limit
from harness.store.files import atomic_write_json

HERE = Path(__file__).parent
ORACLES = ["torch_sdpa"]
GPU_TILES = ("block_q", "block_k", "block_q_dkv", "block_kv_dkv", "block_q_dq", "block_kv_dq")
SPLASH_TILES = {
    "block_q": 128,
    "block_kv": 128,
    "block_kv_compute": 128,
    "block_kv_dkv": 128,
    "block_kv_dkv_compute": 128,
    "block_q_dq": 128,
    "block_kv_dq": 128,
}


# name -> (the unfixed kernel's spec, a thunk giving the case). Thunks: a case may read a file that
# needs its kernel's contract (the GPU divergence file is outside the unlifted pallas_gpu contract).
CASES = {
    "splash_backward_nan": (
        "pallas_splash",
        # 256 query rows of which the last 128 are padding that sees no key (a block-sparse mask: padding
        # through segment ids would not do, splash visits those tiles), 128 keys, block_q_dkv 256 > block_q 128.
        lambda: Case(
            batch=1,
            q_heads=1,
            kv_heads=1,
            q_len=256,
            kv_len=128,
            head_dim=64,
            mask=Mask(block_sparse=BlockSparse(block_q=128, block_kv=128, pattern=("1", "0"))),
            blocks=tuple(sorted({**SPLASH_TILES, "block_q_dkv": 256}.items())),
        ),
    ),
    "pallas_gpu_causal": (
        "docs.findings.fixes.pallas_gpu_causal:unfixed",
        lambda: Case.from_json(
            __import__("json").loads(
                (HERE.parent.parent / "divergences" / "pallas_gpu_causal_q_longer_than_kv.json").read_text()
            )["case"]
        ),
    ),
    "xla_float64_softmax": (
        "docs.findings.fixes.xla_float64_softmax:unfixed",
        # The harness's first measurement of it (the note): B=1 H=2 L=16 D=32 float64.
        lambda: Case(batch=1, q_heads=2, kv_heads=2, q_len=16, kv_len=16, head_dim=32, dtype="float64"),
    ),
    "paged_float32_pages": (
        "docs.findings.fixes.paged_float32_pages:unfixed",
        # One decode query over 64 float32 keys in plain pages, the adapter's default page layout.
        lambda: Case(batch=1, q_heads=1, kv_heads=1, q_len=1, kv_len=64, head_dim=128),
    ),
    "splash_layout_identity": (
        "docs.findings.fixes.splash_layout_identity:unfixed",
        # The note's case: causal, L 256, head_dim 64, default tiles.
        lambda: Case(batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=256, head_dim=64, mask=Mask(causal="top_left")),
    ),
    "pallas_gpu_xla_backward": (
        "docs.findings.fixes.pallas_gpu_xla_backward:unfixed",
        # The script's case: B=1 H=1 L=64 D=64 float16, one 64-row tile everywhere, the xla backward.
        lambda: Case(
            batch=1,
            q_heads=1,
            kv_heads=1,
            q_len=64,
            kv_len=64,
            head_dim=64,
            dtype="float16",
            blocks=tuple(sorted({**dict.fromkeys(GPU_TILES, 64), "backward_xla": 1}.items())),
        ),
    ),
    "torch_float32_mask": (
        "docs.findings.fixes.torch_float32_mask:unfixed",
        # The note's script, as a case: 4 queries, 16 keys (one float32 vector's worth), bottom-right causal.
        lambda: Case(
            batch=1,
            q_heads=1,
            kv_heads=1,
            q_len=4,
            kv_len=16,
            head_dim=8,
            dtype="float64",
            mask=Mask(causal="bottom_right"),
            blocks=(("mask_form", 3),),
        ),
    ),
    "torch_masked_row": (
        "docs.findings.fixes.torch_masked_row:unfixed",
        # Every key of every query hidden (one tile, pattern "0"), as the finfo.min mask form; seed 1 (odd): the
        # rows that see no key have a cotangent, and their gradients are judged.
        lambda: Case(
            batch=1,
            q_heads=1,
            kv_heads=1,
            q_len=16,
            kv_len=16,
            head_dim=32,
            dtype="float32",
            mask=Mask(block_sparse=BlockSparse(block_q=32, block_kv=32, pattern=("0",))),
            blocks=(("mask_form", 2),),
            seed=1,
        ),
    ),
    "ragged_empty_sequence": (
        "pallas_ragged_paged",
        # The harness's failure (seed 1), without its v_scale and spare query rows: sequences of 0, 1 and 15
        # keys (as many queries), one 16-key page per kv block, 16 queries per block.
        lambda: Case(
            batch=3,
            q_heads=2,
            kv_heads=2,
            q_len=16,
            kv_len=16,
            head_dim=128,
            mask=Mask(causal="bottom_right", lengths=Lengths(q=(0, 1, 15), kv=(0, 1, 15))),
            blocks={"page_size": 16, "num_kv_pages_per_block": 1, "num_queries_per_block": 16, "spare_pages": 1},
        ),
    ),
    "ragged_interpreter": (
        "pallas_ragged_paged",
        # The adapter's own probe case (a decode query over 9 keys and 8 prefill queries over 16, two 8-key pages
        # each): any case reads its K/V pages through the reshape.
        lambda: contract.resolve("pallas_ragged_paged").probe_case,
    ),
}


def write(name: str) -> Path:
    spec, make = CASES[name]
    kernel, oracles = contract.resolve(spec), [contract.resolve(o) for o in ORACLES]
    case = make()
    problems = kernel.violations(case)
    if problems:
        raise SystemExit(f"{name}: case outside {kernel.name}'s contract: {'; '.join(problems)}")
    # In a worker, as `run` and `repro` call kernels: an interpreter that cannot serve the kernel is then its
    # failure (as repro reports it), not an exception here.
    result = run_case(case, [kernel, *oracles], time_limit=default_time_limit())
    if all(s.passed for s in result.subjects if s.implementation == kernel.name):
        raise SystemExit(f"{name}: {spec} passes {case}: the case shows nothing")
    doc = failure_document(result, kernel=spec, oracles=ORACLES, grads=True)
    path = HERE / f"{name}.json"
    atomic_write_json(path, doc)
    return path


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(write(arg))
