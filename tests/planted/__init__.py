"""Planted-bug drop-ins: the upstream flash kernel with one line changed.

Each module exposes `flash_attention` with the upstream signature, so the harness
tests it with `--kernel tests.planted.<module>:flash_attention`. The harness must
catch every one in PLANTED under the ci profile (tests/test_planted.py; CPU seconds
to detect each: `python -m tests.bench_planted`). FIXTURES serve the interpreter checks
and the per-case time limit.
"""

from collections.abc import Callable

# module -> the kind of bug it plants
PLANTED: dict[str, str] = {
    "fwd_causal_off_by_one": "mask",
    "fwd_rescale_alpha": "online-softmax rescaling",
    "bwd_dkv_causal": "backward only",
    "fwd_v_offset_minor_blocks": "block-size configuration only",
    "fwd_qk_bfloat16": "precision loss",
}

# What each planted edit needs to be seen, from the edit itself (not from a run): the trigger the search
# reduces its failure to (harness.running.search) must name it. A feature is "group:value" (signatures.plain).
TRIGGERS: dict[str, tuple[str, Callable[[tuple[str, ...]], bool]]] = {
    # The causal comparison is edited: no causal mask, nothing changes.
    "fwd_causal_off_by_one": ("a causal mask", lambda t: any(f.startswith("mask:causal") for f in t)),
    "bwd_dkv_causal": ("a causal mask", lambda t: any(f.startswith("mask:causal") for f in t)),
    # The running denominator is rescaled only between key tiles: one tile, nothing changes; several major or
    # several minor key blocks alike (pallas_flash's tiling family, Capabilities.tiling_families).
    "fwd_rescale_alpha": ("more than one key tile", lambda t: "tiling:several_key_tiles" in t),
    # Only a minor key step inside a major tile reads the wrong v.
    "fwd_v_offset_minor_blocks": ("minor key blocks", lambda t: "tiling:several_minor" in t),
    # A float32 case loses its logits' precision; no mask, tiling or value regime is needed.
    "fwd_qk_bfloat16": (
        "nothing but a dtype wider than bfloat16",
        lambda t: all(f.startswith("dtype:") and f != "dtype:bfloat16" for f in t),
    ),
}

# Planted bugs of the other kernels: module -> its --kernel argument. A run keeps one failure file for each
# too (besides the findings the upstream kernel has, named as such), its trigger naming what the edit needs.
ELSEWHERE: dict[str, str] = {
    "splash_fwd_window_off_by_one": "pallas_splash=tests.planted.splash_fwd_window_off_by_one:make_splash",
    "splash_dsinks_sign": "pallas_splash=tests.planted.splash_dsinks_sign:make_splash",
    "splash_soft_cap_after_mask": "pallas_splash=tests.planted.splash_soft_cap_after_mask:make_splash",
    "paged_soft_cap_unscaled": "pallas_paged=tests.planted.paged_soft_cap_unscaled:paged_attention",
    "paged_page_table_off_by_one": "pallas_paged=tests.planted.paged_page_table_off_by_one:paged_attention",
    "ragged_kv_len_off_by_one": "pallas_ragged_paged=tests.planted.ragged_kv_len_off_by_one:ragged_paged_attention",
    "xla_ignores_kv_lengths": "jax_xla=tests.planted.xla_ignores_kv_lengths:dot_product_attention",
    "xla_window_off_by_one": "jax_xla=tests.planted.xla_window_off_by_one:dot_product_attention",
}
TRIGGERS |= {
    # The key offset of splash's mask function: every mask it computes (causal, window, chunk) is off by one.
    "splash_fwd_window_off_by_one": ("a computable mask", lambda t: "mask:computable" in t),
    "splash_dsinks_sign": ("the sinks option", lambda t: "option:sinks" in t),
    # The cap applied to the masked logits too: a mask's hidden keys get weight exp(-cap) instead of none.
    "splash_soft_cap_after_mask": (
        "the soft_cap option and a mask",
        lambda t: "option:soft_cap" in t and any(f.startswith("mask:") for f in t),
    ),
    "paged_soft_cap_unscaled": ("the soft_cap option", lambda t: "option:soft_cap" in t),
    # Its reads past the page table raise under the interpreter on the plainest case; where valid key lengths keep
    # them inside the table they give wrong values: one bug (signatures.symptom), found at the plainest case.
    "paged_page_table_off_by_one": ("nothing beyond the plainest case", lambda t: t == ()),
    # Every ragged case is causal at its diagonal: the plainest case has what the edit needs.
    "ragged_kv_len_off_by_one": ("nothing beyond the plainest (always causal) case", lambda t: t == ()),
    "xla_ignores_kv_lengths": ("key lengths", lambda t: "mask:kv_lengths" in t),
    # The left edge of a window bounded on the left (causal_offset has no left edge).
    "xla_window_off_by_one": ("a window mask", lambda t: "mask:window" in t),
}

# Fixtures for the interpreter checks, not in the ci detection set: a misdeclared 'parallel'
# axis may happen to run in order under the interpreter's default grid order, so only the
# grid-order check sees it; a ci search with the check first failed at case 18 (198 CPU s,
# measured), so tests/test_runner.py checks it on a case with four key tiles directly.
FIXTURES: dict[str, str] = {
    "fwd_kv_axis_parallel": "grid order",
    "hang": "never returns",
    # Reads scratch it never wrote: a kernel failure on both interpreters, or (where the faithful one
    # fills such memory with zeros) an interpreter divergence; never a pass (tests/test_planted.py).
    "fwd_acc_uninitialized": "uninitialised scratch",
}

# Bugs whose error is a few tens of times the bound, not millions: the default suite runs each
# on one fixed case (tests/test_planted.py), so a tolerance that loosens turns the suite red.
SUBTLE: dict[str, str] = {"fwd_p_bfloat16": "precision loss (subtle)"}


# Negative controls for issue 28's checks, each caught in the default suite on one fixed case while the
# upstream kernel passes it (tests/test_planted.py): module -> the check that catches it.
CONTROLS: dict[str, str] = {
    "flash_rerun_ulp": "reproducible (one ulp on every other call)",
    "xla_batch_ulp": "batch_invariant (one ulp when the batch holds more than one row)",
    "flash_batch_ulp": "batch_invariant of out alone (one ulp per batch row beyond the first)",
    "fwd_mask_value_finite": "extreme_values (a finite mask value of -5e4)",
}


# Forks whose answer is the upstream one but whose compiled program is worse around the kernel: the
# gate's outline rows catch each (tests/test_outline_gate.py): module -> what its outline shows.
OUTLINE: dict[str, str] = {
    "relayout_k": "a layout-changing copy of k before the forward kernel",
    "anonymous_kernel": "the forward kernel named _lambda_ (a profiler shows it anonymous)",
}

# Interpreter checks a bug needs to be seen (harness.runtime.compat.InterpretOptions fields).
INTERPRET: dict[str, dict] = {"fwd_kv_axis_parallel": {"random_seed": 1, "check_grid_order": True}}


def spec(name: str) -> str:
    """The --kernel argument for a planted module."""
    return f"tests.planted.{name}:flash_attention"
