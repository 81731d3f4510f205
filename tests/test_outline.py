"""The program outline (harness.store.outline, harness.tpu.outline): read from optimized HLO text,
stored in a compile record, and recorded by the real compile for a compile-only v5e."""

from __future__ import annotations

import base64
import dataclasses
import hashlib

import pytest

from harness.core import contract
from harness.core.shapes import SHAPES
from harness.store.outline import KernelCall, Outline
from harness.store.records import CompileRecord
from harness.store.schema import RecordError
from harness.tpu import outline
from tests import record_builders as rb

BODY = base64.b64encode(b"mosaic body").decode()
K = 1 * 2 * 256 * 128 * 4  # bytes of one f32[1,2,256,128]

# The shape of a real optimized program (pallas_flash fwd, k laid out otherwise for the kernel), cut
# down: an async copy of q, a layout-changing copy of k, a bitcast, and a kernel call whose backend
# config spans lines (splash's does) with a line that starts with "}}".
HLO = f"""HloModule jit_f, is_scheduled=true

%fused_computation (param_0: f32[4,8]) -> f32[4,8] {{
  %param_0 = f32[4,8]{{1,0}} parameter(0)
  ROOT %neg = f32[4,8]{{1,0}} negate(%param_0)
}}

ENTRY %main.2 (q.1: f32[1,2,256,128], k.1: f32[1,2,256,128]) -> f32[1,2,256,128] {{
  %k.1 = f32[1,2,256,128]{{3,2,1,0:T(8,128)}} parameter(1), metadata={{op_name="k"}}
  %q.1 = f32[1,2,256,128]{{3,2,1,0:T(8,128)}} parameter(0), metadata={{op_name="q"}}
  %copy-start = (f32[1,2,256,128]{{3,2,1,0:T(8,128)S(1)}}, f32[1,2,256,128]{{3,2,1,0:T(8,128)}}, u32[]{{:S(2)}}) copy-start(%q.1)
  %copy = f32[1,2,256,128]{{2,3,1,0:T(8,128)S(1)}} copy(%k.1), metadata={{op_name="jit(f)/transpose"}}
  %copy-done = f32[1,2,256,128]{{3,2,1,0:T(8,128)S(1)}} copy-done(%copy-start)
  %bitcast.1 = f32[1,2,128,256]{{3,2,1,0:T(8,128)S(1)}} bitcast(%copy)
  ROOT %flash_attention.1 = f32[1,2,256,128]{{3,2,1,0:T(8,128)}} custom-call(%copy-done, /*index=1*/%bitcast.1), custom_call_target="tpu_custom_call", metadata={{op_name="jit(f)/jit(flash_attention)/pallas_call"}}, backend_config={{"custom_call_config":{{"body":"{BODY}",
"xprof_metadata":"{{}}"
}}}}
}}
"""  # noqa: E501 - HLO lines are as long as XLA writes them


def _outline() -> Outline:
    return outline.from_hlo_text(HLO, {hashlib.sha256(b"mosaic body").hexdigest(): "_flash_attention_kernel"})


def test_the_kernel_call_keeps_both_names_and_its_bytes() -> None:
    (k,) = _outline().kernels
    assert (k.name, k.kernel_name, k.op_name) == (
        "flash_attention.1",
        "_flash_attention_kernel",
        "jit(f)/jit(flash_attention)/pallas_call",
    )
    assert (k.bytes_read, k.bytes_written) == (2 * K, K) and not k.anonymous


def test_ops_that_move_data_are_listed_by_kind_and_a_layout_changing_copy_is_a_relayout() -> None:
    o = _outline()
    assert [(op.name, op.kind, op.bytes_read, op.bytes_written, op.relayout) for op in o.ops] == [
        ("copy-start", "copy-start", K, K, False),  # into another memory space, same layout
        ("copy", "copy", K, K, True),
    ]
    assert o.outside_bytes == 4 * K and o.kernel_bytes == 3 * K
    assert o.outside_share == pytest.approx(4 / 7)
    assert {k: (t.count, t.bytes, t.relayouts) for k, t in o.by_kind().items()} == {
        "copy": (1, 2 * K, 1),
        "copy-start": (1, 2 * K, 0),
    }


@pytest.mark.parametrize(
    ("name", "kernel_name", "anonymous"),
    [
        pytest.param("flash_attention.1", "_flash_attention_kernel", False, id="named"),
        pytest.param("flash_attention.1", "_lambda_", True, id="lambda-kernel"),
        pytest.param("pallas_call.3", "_flash_attention_kernel", True, id="unscoped-call"),
        pytest.param("flash_attention.1", None, False, id="name-not-read"),
    ],
)
def test_a_kernel_is_anonymous_when_either_name_says_nothing(name: str, kernel_name: str | None, anonymous: bool):
    assert KernelCall(name=name, kernel_name=kernel_name).anonymous is anonymous


def test_a_compile_record_round_trips_its_outline_and_older_records_read_without_one() -> None:
    doc = rb.compile_record("20261204T000000Z-ci-aaaaaa", outline=None)
    assert "outline" not in doc and CompileRecord.from_json(doc).outline is None
    rec = dataclasses.replace(CompileRecord.from_json(doc), outline=_outline())
    again = CompileRecord.from_json(rec.to_json())
    assert again.outline == _outline() and again == rec
    with pytest.raises(RecordError, match="outline does not read"):
        CompileRecord.from_json({**doc, "outline": {"ops": [{"nope": 1}]}})


def test_text_without_an_entry_computation_is_refused() -> None:
    with pytest.raises(ValueError, match="no ENTRY"):
        outline.from_hlo_text("HloModule m\n")


def test_the_compile_records_the_outline_of_the_real_program() -> None:
    pytest.importorskip("libtpu", reason="compile checks need libtpu (pip install .[tpu])")
    from harness.tpu import compile as aot

    r = aot.compile_one(contract.resolve("pallas_flash"), SHAPES["mha_f32_256"], "v5e:1x1", "fwd_bwd")
    assert r.ok and r.outline_error is None, r.error or r.outline_error
    o = Outline.from_json(r.outline)
    assert [k.kernel_name for k in o.kernels] == [
        "_flash_attention_kernel",
        "_flash_attention_dkv_kernel",
        "_flash_attention_dq_kernel",
    ]
    assert not any(k.anonymous for k in o.kernels) and 0 < o.outside_share < 1


def test_an_async_slice_counts_the_part_it_moves_once() -> None:
    # As XLA writes it for the GQA flash forward on v5e: the start's result holds its operand.
    hlo = """ENTRY %main (k.1: bf16[2,8,2048,128]) -> bf16[1,8,2048,128] {
  %k.1 = bf16[2,8,2048,128]{3,2,1,0:T(8,128)(2,1)} parameter(0)
  %slice-start = ((bf16[2,8,2048,128]{3,2,1,0:T(8,128)(2,1)}), bf16[1,8,2048,128]{3,2,1,0:T(8,128)(2,1)S(1)}, s32[]{:S(2)}) slice-start(%k.1), slice={[0:1], [0:8], [0:2048], [0:128]}
  ROOT %slice-done = bf16[1,8,2048,128]{3,2,1,0:T(8,128)(2,1)S(1)} slice-done(%slice-start)
}
"""  # noqa: E501 - as XLA writes it
    (op,) = outline.from_hlo_text(hlo).ops
    half = 8 * 2048 * 128 * 2
    assert (op.kind, op.bytes_read, op.bytes_written, op.relayout) == ("slice-start", half, half, False)
