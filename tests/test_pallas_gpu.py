"""The Pallas GPU adapter: its contract (shared segment ids, backward tile counts, causal
with q_len <= kv_len) and one small run under the interpreter."""

from __future__ import annotations

import pytest

from tests import _removed

_removed.require(_removed.GPU_ATTENTION)  # before the adapter's import, which imports the module

from hypothesis import find  # noqa: E402

from harness.core import contract  # noqa: E402
from harness.core.case import Case  # noqa: E402
from harness.core.masks import Mask, Segments  # noqa: E402
from harness.running.runner import run_case  # noqa: E402
from harness.runtime import isa  # noqa: E402
from kernels.pallas_gpu import PallasGpu  # noqa: E402

BLOCKS = {"block_q": 32, "block_k": 64, "block_q_dkv": 16, "block_kv_dkv": 32, "block_q_dq": 32, "block_kv_dq": 64}
SHARED = Segments(q=(((0, 40), (1, 24)),), kv=(((0, 40), (1, 24)),))


def _case(**changes) -> Case:
    return Case(batch=1, q_heads=1, kv_heads=1, q_len=64, kv_len=64, head_dim=64, blocks=tuple(BLOCKS.items())).replace(
        **changes
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param(
            {"mask": Mask(segments=Segments(q=(((0, 64),),), kv=(((1, 64),),)))}, "identical for q and kv", id="segs"
        ),
        pytest.param(
            {"mask": Mask(causal="top_left"), "kv_len": 32, "blocks": ()}, "reads key tiles past", id="causal"
        ),
        pytest.param({"mask": Mask(causal="bottom_right")}, "causal_bottom_right", id="bottom-right"),
        pytest.param({"blocks": {**BLOCKS, "block_kv_dkv": 16}}, "must equal kv_len/block_kv_dkv", id="tile-count"),
        pytest.param({"blocks": {**BLOCKS, "block_q": 48}}, "block_q=48 must be one of", id="tile"),
        pytest.param({"q_len": 64, "kv_len": 256, "blocks": ()}, "q_len/block_q_dq=64/32", id="default-blocks"),
        pytest.param({"blocks": {**BLOCKS, "num_warps": 3}}, "num_warps=3 must be one of (2, 4, 8)", id="warps"),
        pytest.param({"blocks": {**BLOCKS, "backward_xla": 2}}, "backward_xla=2 must be one of (1,)", id="bwd"),
        pytest.param(
            {"blocks": {**BLOCKS, "backward_xla": 1}, "dtype": "bfloat16"}, "pallas_gpu_xla_backward_16bit", id="bwd16"
        ),
    ],
)
def test_violations_name_the_value_and_limit(changes: dict, message: str) -> None:
    problems = PallasGpu().violations(_case(**changes))
    assert any(message in p for p in problems), problems


def test_shared_segments_and_causal_with_gqa_match_the_oracles_forward_and_backward() -> None:
    if refused := isa.float16_refusal():
        pytest.skip(refused)  # a float16 case: no float16 ruler at this --xla_cpu_max_isa (the harness says exit 2)
    # With mha's other arguments: the Triton launch parameters and the residuals.
    blocks = {**BLOCKS, "num_warps": 2, "num_stages": 3}
    case = _case(
        q_heads=2, dtype="float16", head_dim=80, mask=Mask(causal="top_left", segments=SHARED), scale=0.25
    ).replace(blocks=tuple(blocks.items()), residuals=True)
    assert PallasGpu().violations(case) == []
    result = run_case(case, [contract.resolve("pallas_gpu")])
    assert result.passed, result.subjects[0].failure
    assert "lse" in {c.quantity for c in result.subjects[0].comparisons}


def test_the_xla_backward_matches_the_oracles_in_float32() -> None:
    case = _case(mask=Mask(causal="top_left")).replace(blocks=tuple({**BLOCKS, "backward_xla": 1}.items()))
    result = run_case(case, [contract.resolve("pallas_gpu")])
    assert result.passed, result.subjects[0].failure


def test_before_block_sizes_mha_is_given_its_own_two_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    # jax 0.4.30 to 0.5.0 have no BlockSizes: mha takes block_q and block_k itself, the backward pass too.
    # The adapter called BlockSizes there, so the kernel could not run at all (nox -s history, 0.4.30).
    import types

    from jax.experimental.pallas.ops.gpu import attention as upstream

    from kernels import pallas_gpu

    old = pallas_gpu.tiles_of(types.SimpleNamespace(mha=None))
    assert old == {"block_q": "q_len", "block_k": "kv_len"} and pallas_gpu.tiles_of(upstream) == pallas_gpu.ALL_TILES
    monkeypatch.setattr(pallas_gpu, "BLOCK_SIZES", False)
    monkeypatch.setattr(pallas_gpu, "BLOCKS", old)
    calls = []

    def mha(q, k, v, segment_ids, sm_scale=1.0, causal=False, block_q=128, block_k=128, backward_pass_impl="triton",
            num_warps=None, num_stages=2, grid=None, interpret=False, debug=False):  # fmt: skip # noqa: ANN001, ANN202
        calls.append((block_q, block_k))
        tiles = dict(block_q=block_q, block_k=block_k, block_q_dkv=block_q, block_kv_dkv=block_k)
        sizes = upstream.BlockSizes(**tiles, block_q_dq=block_q, block_kv_dq=block_k)
        return upstream.mha(
            q, k, v, segment_ids, sm_scale=sm_scale, causal=causal, block_sizes=sizes, interpret=interpret
        )

    impl = pallas_gpu.dropin(mha, name="mha_0_4_30")
    drawn = find(impl.block_strategy(_case(blocks=())), lambda blocks: True)
    assert set(drawn) - set(pallas_gpu.OPTIONS) == {"block_q", "block_k"}
    assert any("must name" in p for p in impl.violations(_case()))  # BlockSizes' six fields are not its tiles
    assert impl.violations(_case(blocks=())) == []  # its defaults, 128 clamped to the sequence
    case = _case(blocks=(("block_q", 32), ("block_k", 32)), mask=Mask(causal="top_left"))
    assert impl.violations(case) == []
    result = run_case(case, [impl])
    assert result.passed, result.subjects[0].failure
    assert set(calls) == {(32, 32)}


def test_a_tile_that_leaves_part_of_its_sequence_is_drawn_only_where_mha_accepts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # jax 0.6.2 on raise for it; before, mha read past the sequence's end: NaN (docs/history.md MHA-3).
    # The adapter kept today's check on every release, so the untold history run could not meet the bug.
    from jax.experimental.pallas.ops.gpu import attention as upstream

    from kernels import pallas_gpu

    assert pallas_gpu.refuses_partial_tiles(upstream.mha)  # the installed release checks
    assert not pallas_gpu.refuses_partial_tiles(lambda q, k, v, segment_ids, **kw: q)  # one that does not
    case = _case(q_len=96, kv_len=96, blocks=())
    partial = case.replace(blocks=tuple({**BLOCKS, "block_q": 64, "block_q_dkv": 64}.items()))
    problems = PallasGpu().violations(partial)
    # The installed mha's own refusal, no wrong answer: a replay there is "refused", bisect's fixed side.
    assert "block_q=64 must divide q_len=96: this mha refuses a partial tile" in problems, problems
    assert contract.refused(problems)
    # A tile no mha takes is the harness's own limit, not the library's refusal.
    assert not contract.refused(
        PallasGpu().violations(partial.replace(blocks=tuple({**BLOCKS, "block_q": 48}.items())))
    )
    monkeypatch.setattr(pallas_gpu, "PARTIAL_TILES", True)
    monkeypatch.setattr(pallas_gpu, "TILINGS", ("one_tile", "several_tiles", "partial_tile"))
    drawn = find(pallas_gpu._gpu_blocks(case), lambda blocks: blocks["block_q"] == 64)  # a tile and a half
    assert PallasGpu().violations(case.replace(blocks=tuple(drawn.items()))) == []
    assert PallasGpu().violations(partial) == []
    assert PallasGpu().tiling(partial) == {"partial_tile", "several_tiles"}
    assert PallasGpu().tiling(_case(blocks=tuple(dict.fromkeys(BLOCKS, 64).items()))) == {"one_tile"}


def test_a_failure_file_from_the_other_tile_api_replays_the_same_program(monkeypatch: pytest.MonkeyPatch) -> None:
    # Up to jax 0.5.0 mha takes block_q and block_k, and its backward reuses them for both passes;
    # 0.5.1's BlockSizes names six tiles. A file from either replays on the other where it can say
    # the same thing (docs/history.md: bisecting a 0.5.0 failure across 0.5.1).
    from kernels import pallas_gpu

    two = {"block_q": 16, "block_k": 32, "num_warps": 4}
    six = {"block_q": 16, "block_k": 32, "block_q_dkv": 16, "block_kv_dkv": 32, "block_q_dq": 16, "block_kv_dq": 32}
    assert pallas_gpu.as_installed(two) == {**six, "num_warps": 4}  # BlockSizes is installed here
    assert pallas_gpu.as_installed(six) == six
    assert PallasGpu().violations(_case(blocks=(("block_q", 32), ("block_k", 32)))) == []
    # Two tiles that cut q and kv into different counts give the dq and dkv passes different grids,
    # which this mha refuses (0.5.1 on); so do equal tiles over unequal lengths.
    for case in (
        _case(blocks=tuple(two.items())),
        _case(q_len=128, kv_len=64, blocks=(("block_q", 16), ("block_k", 16))),
    ):
        problems = PallasGpu().violations(case)
        assert contract.refused(problems) and "one backward grid axis" in problems[0], problems
        # mha checks the grid only for its own backward kernels, not backward_pass_impl="xla".
        assert PallasGpu().violations(case.replace(blocks=(*case.blocks, ("backward_xla", 1)))) == []
    monkeypatch.setattr(pallas_gpu, "BLOCK_SIZES", False)
    assert pallas_gpu.as_installed(six) == {"block_q": 16, "block_k": 32}
    # Backward tiles the old API cannot express are left for violations to name.
    assert pallas_gpu.as_installed({**six, "block_q_dq": 32}) == {**six, "block_q_dq": 32}
