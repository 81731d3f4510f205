import json

import pytest

from harness.core.case import Case, CaseError
from harness.core.masks import Lengths, Mask, Segments

SEGS = Segments(q=(((0, 100), (99, 28)),), kv=(((0, 60), (1, 196)),))
FULL = Case(
    batch=1,
    q_heads=4,
    kv_heads=2,
    q_len=128,
    kv_len=256,
    head_dim=64,
    dtype="bfloat16",
    mask=Mask(causal="top_left", segments=SEGS),
    bias=True,
    scale=0.5,
    blocks={"block_q": 128, "block_b": 1},
    regime="large",
    seed=7,
)


DECODE = Case(
    batch=2,
    q_heads=4,
    kv_heads=1,
    q_len=1,
    kv_len=64,
    head_dim=64,
    mask=Mask(lengths=Lengths(kv=(0, 33), kv_starts=(0, 1))),
    blocks={"page_size": 16, "pages_per_compute_block": 2, "spare_pages": 1},
    kv_format="int8",
)


def test_kv_format_is_written_only_when_set_so_old_case_ids_stay():
    assert "kv_format" not in FULL.to_json()
    assert DECODE.to_json()["kv_format"] == "int8"
    assert "kv=int8" in str(DECODE)
    with pytest.raises(CaseError, match="kv_format='int4'"):
        DECODE.replace(kv_format="int4")


@pytest.mark.parametrize(
    "case", [Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64), FULL, DECODE]
)
def test_json_round_trip(case):
    text = json.dumps(case.to_json())
    back = Case.from_json(json.loads(text))
    assert back == case
    assert back.case_id == case.case_id
    assert hash(back) == hash(case)


def test_blocks_are_normalised_so_equal_cases_compare_equal():
    a = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, blocks={"block_q": 128, "block_b": 1})
    b = Case(
        batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, blocks=(("block_b", 1), ("block_q", 128))
    )
    assert a == b and a.case_id == b.case_id


def test_str_is_readable():
    s = str(FULL)
    for piece in (
        "B=1",
        "Hq=4/Hkv=2",
        "Lq=128/Lk=256",
        "D=64",
        "bfloat16",
        "causal_top_left",
        "segments",
        "bias",
        "large",
        "scale=0.5",
        "seed=7",
        "block_q=128",
    ):
        assert piece in s
    assert "99x28" in repr(FULL.mask)


def test_default_scale_is_inverse_sqrt_head_dim():
    assert Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64).sm_scale == pytest.approx(0.125)
    assert Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, scale=1.0).sm_scale == 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"batch": 0}, "batch=0 must be a positive integer", id="zero-batch"),
        pytest.param({"head_dim": 2.5}, "head_dim=2.5", id="float-dim"),
        pytest.param({"q_heads": 3, "kv_heads": 2}, "multiple of kv_heads=2", id="gqa-groups"),
        pytest.param({"dtype": "float8"}, "dtype='float8' is not one of", id="dtype"),
        pytest.param({"regime": "huge"}, "regime='huge'", id="regime"),
        pytest.param({"scale": -1.0}, "scale=-1.0", id="negative-scale"),
        pytest.param({"scale": float("nan")}, "scale=nan", id="nan-scale"),
        pytest.param({"seed": -1}, "seed=-1", id="seed"),
        pytest.param({"blocks": {"block_q": 0}}, "block_q=0 must be positive", id="block"),
        pytest.param({"mask": Mask(segments=SEGS)}, "segment runs must cover", id="segments-length"),
    ],
)
def test_bad_cases_name_the_field(kwargs, message):
    base = {"batch": 1, "q_heads": 2, "kv_heads": 2, "q_len": 128, "kv_len": 128, "head_dim": 64}
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace("[", r"\[")):
        Case(**{**base, **kwargs})


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(lambda d: d.pop("head_dim"), "missing fields \\['head_dim'\\]", id="missing"),
        pytest.param(lambda d: d.update(colour="red"), "unknown fields \\['colour'\\]", id="unknown"),
        pytest.param(lambda d: d.update(schema=99), "schema=99", id="schema"),
        pytest.param(lambda d: d.update(mask={"causal": "diagonal"}), "causal='diagonal'", id="causal"),
        pytest.param(lambda d: d.update(mask={"sideways": True}), "unknown mask fields", id="mask-field"),
        pytest.param(lambda d: d.update(blocks=[1, 2]), "bad case field", id="blocks-type"),
    ],
)
def test_from_json_is_strict(mutate, message):
    d = FULL.to_json()
    mutate(d)
    with pytest.raises(CaseError, match=message):
        Case.from_json(d)


def test_from_json_rejects_non_objects():
    with pytest.raises(CaseError, match="must be a JSON object"):
        Case.from_json([1, 2])


def test_soft_cap_sinks_and_residuals_are_written_only_when_set() -> None:
    assert not {"soft_cap", "sinks", "residuals"} & set(FULL.to_json())
    capped = FULL.replace(soft_cap=5.0, sinks=True, residuals=True, dtype="float64")
    assert Case.from_json(capped.to_json()) == capped
    assert capped.case_id != FULL.case_id
    with pytest.raises(CaseError, match="soft_cap=0"):
        FULL.replace(soft_cap=0.0)
    with pytest.raises(CaseError, match="sinks=1"):
        FULL.replace(sinks=1)
