"""API coverage declarations (harness.core.coverage): each adapter's declarations against the installed
library's real signatures, the reading of signatures, and the store's coverage by `python -m harness coverage`.

Cheap: signatures and fake records, no kernel runs (the command test reads a store of builders)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from harness.cli import main
from harness.core import contract, strategies
from harness.core import coverage as cov
from harness.core.case import Case
from harness.core.masks import Lengths, Mask, Segments
from harness.store import cells
from harness.store.read import load as load_store
from tests import _removed
from tests import record_builders as rb

# Parameters of a wrapped API that some release in the matrix (harness.environments.matrix) lacks, read from
# upstream's source at each release tag: an installed library may lack these, and only these.
ABSENT_IN_SOME_RELEASE = {
    "jax.nn.dot_product_attention": {"return_residual"},  # jax 0.7.0
    "splash_attention.SplashAttentionKernel.__call__": {"sinks"},  # jax 0.7.0
    "gpu.attention.mha": {"block_q", "block_k"},  # jax 0.5.1 on (its tiles went into BlockSizes); block_sizes before
}


def every_implementation() -> list[contract.Implementation]:
    """Every implementation the code defines, those registered only on a GPU or TPU included
    (each adapter declares its hardware: contract.About.needs, register(here=...))."""
    return list(contract.defined().values())


EVERY = every_implementation()
APIS = [pytest.param(impl, api, id=f"{impl.name}:{api.name}") for impl in EVERY for api in impl.api]


# Draws per implementation within which every parameter it declares drawn must turn up. Measured
# (derandomized, jax 0.10.2): the last to turn up was pallas_gpu's segment_ids, at draw 62; 600 leaves
# room for strategies to change. The search stops at the draw that completes the set (a few dozen).
DRAWS = 600
DRAW_SETTINGS = settings(
    max_examples=DRAWS,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("impl", EVERY, ids=lambda i: i.name)
def test_the_strategy_can_draw_every_parameter_declared_drawn(impl: contract.Implementation) -> None:
    # A parameter declared drawn that no case of the strategy exercises would read as covered in
    # the declarations and never be tested (jax_cudnn's return_residual was one). Strategies only.
    # Only what the installed library has: a release without a parameter draws no case that needs it.
    wanted = {
        f"{api.name}.{p.name}": p.exercised
        for api in impl.api
        for p in api.params
        if p.exercised and p.name in api.presence()["present"]
    }
    missing = set(wanted)

    def completes(case: Case) -> bool:
        missing.difference_update([name for name in missing if wanted[name](case)])
        return not missing

    with contextlib.suppress(NoSuchExample):
        find(strategies.cases(impl), completes, settings=DRAW_SETTINGS)
    assert not missing, f"{impl.name}: declared drawn, exercised by none of {DRAWS} drawn cases: {sorted(missing)}"


@pytest.mark.parametrize("impl", EVERY, ids=lambda i: i.name)
def test_every_implementation_declares_the_api_it_wraps(impl: contract.Implementation) -> None:
    assert impl.api, f"{impl.name} declares no API (harness.core.coverage.Api in its module)"
    for api in impl.api:
        assert any(p.is_drawn for p in api.params), f"{impl.name}: {api.name} draws nothing"


@pytest.mark.parametrize(("impl", "api"), APIS)
def test_declarations_name_every_parameter_of_the_installed_function(impl, api: cov.Api) -> None:
    presence = api.presence()
    assert presence["installed"], f"{api.name} is not installed here"
    assert not presence["undeclared"], f"{impl.name}: {api.name} has parameters no declaration names"
    unexpected = set(presence["absent"]) - ABSENT_IN_SOME_RELEASE.get(api.name, set())
    assert not unexpected, f"{impl.name}: {api.name} declares parameters it does not have: {sorted(unexpected)}"


def _fn(q, k, v, bias=None, *, scale=1.0, soft_cap=None):  # noqa: ANN001, ANN202 - a stand-in API
    return q


DECLARED = cov.Api(
    name="fn",
    locate=lambda: _fn,
    params=(
        *(cov.Param(name=n, drawn="arrays", exercised=cov.always) for n in ("q", "k", "v")),
        cov.Param(name="bias", drawn="float bias, or None", exercised=cov.has_bias),
        cov.Param(name="scale", drawn="1.0, 0.25", exercised=cov.explicit_scale),
        cov.Param(name="window", why="a parameter of a newer release"),
    ),
)


def test_a_parameter_the_library_adds_is_undeclared_and_one_it_lacks_is_absent() -> None:
    # soft_cap is in the function and in no declaration; window is declared but not in this "release".
    assert DECLARED.presence() == {
        "installed": True,
        "drawn": ["q", "k", "v", "bias", "scale"],
        "present": ["q", "k", "v", "bias", "scale"],
        "absent": ["window"],
        "undeclared": ["soft_cap"],
    }
    gone = dataclasses.replace(DECLARED, locate=lambda: types.SimpleNamespace().fn)  # a library without it
    assert gone.presence()["installed"] is False


@dataclasses.dataclass(frozen=True)
class _Blocks:
    block_q: int = 128
    block_k: int = 128


def test_parameters_are_read_from_signatures_fields_and_a_builtins_docstring() -> None:
    assert cov.parameters(_fn) == ("q", "k", "v", "bias", "scale", "soft_cap")
    assert cov.parameters(_Blocks) == ("block_q", "block_k")
    import torch.nn.functional as F  # a builtin: no inspect.signature, its docstring's first line

    assert cov.parameters(F.scaled_dot_product_attention)[:4] == ("query", "key", "value", "attn_mask")
    assert cov.accepts(_fn, "soft_cap") and not cov.accepts(_fn, "sinks")
    assert cov.positional("q")(_fn) == ("k", "v", "bias")


def _forwarding(q, *args, **kwargs): ...


class _NoSignature:
    # Neither inspect.signature nor a docstring signature can be read from an instance's __call__ here.
    __signature__ = "not a signature"

    def __call__(self, *args, **kwargs): ...


@pytest.mark.parametrize(
    ("fn", "name", "forwarded", "want"),
    [
        pytest.param(_fn, "soft_cap", True, True, id="named"),
        pytest.param(_fn, "sinks", True, False, id="absent"),
        # A drop-in that forwards its keywords to upstream may be passed a feature (paged soft_cap)...
        pytest.param(_forwarding, "soft_cap", True, True, id="kwargs-forward"),
        # ... but not a name that picks a calling convention (splash's is_mqa, the GPU's return_residuals).
        pytest.param(_forwarding, "is_mqa", False, False, id="kwargs-convention"),
        pytest.param(_forwarding, "kwargs", False, False, id="var-keyword-name-is-no-parameter"),
        pytest.param(_NoSignature(), "soft_cap", True, False, id="unreadable"),
    ],
)
def test_accepts_one_rule_for_every_adapter(fn, name: str, forwarded: bool, want: bool) -> None:
    assert cov.accepts(fn, name, forwarded=forwarded) is want


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param({"drawn": "1, 2"}, "give both drawn= and exercised=", id="drawn-without-predicate"),
        pytest.param({"exercised": cov.always}, "give both drawn= and exercised=", id="predicate-without-drawn"),
        pytest.param({}, "is not drawn: say why", id="no-reason"),
    ],
)
def test_a_declaration_must_say_what_is_drawn_or_why_not(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cov.Param(name="p", **kw)


def test_a_parameter_declared_twice_is_refused() -> None:
    p = cov.Param(name="q", drawn="arrays", exercised=cov.always)
    with pytest.raises(ValueError, match=r"parameters \['q'\] are declared twice"):
        cov.Api(name="fn", locate=lambda: _fn, params=(p, p))


def _case(**kw) -> Case:
    return rb.case(**kw)


def test_predicates_count_the_cases_that_exercised_each_parameter() -> None:
    flash = contract.resolve("pallas_flash")
    segs = Segments(q=(((0, 128),),), kv=(((0, 128),),))
    cases = [
        _case(),
        _case(seed=1, bias=True, scale=0.25),
        _case(seed=2, mask=Mask(causal="top_left", segments=segs), blocks={"block_q": 128}),
    ]
    counts = {(r.api, r.param): r.cases for r in cov.rows(flash, cases + cases[:1])}  # a repeat counts once
    assert counts[("flash_attention.flash_attention", "q")] == 3
    assert counts[("flash_attention.flash_attention", "ab")] == 1
    assert counts[("flash_attention.flash_attention", "sm_scale")] == 1
    assert counts[("flash_attention.flash_attention", "segment_ids")] == 1
    assert counts[("flash_attention.flash_attention", "causal")] == 1
    assert counts[("flash_attention.BlockSizes", "block_q")] == 1
    assert counts[("flash_attention.BlockSizes", "block_k")] == 0
    assert counts[("flash_attention.flash_attention", "debug")] is None  # not drawn


@_removed.needs(_removed.GPU_DECODE)
def test_decode_lengths_count_against_the_entry_point_the_adapter_calls() -> None:
    decode = contract.resolve("pallas_gpu_decode")
    lengths = Mask(lengths=Lengths(kv=(3,)))
    gqa = Case(batch=1, q_heads=2, kv_heads=2, q_len=1, kv_len=64, head_dim=64, mask=lengths)
    mqa = gqa.replace(q_heads=2, kv_heads=1, mask=Mask())
    counts = {(r.api, r.param): r.cases for r in cov.rows(decode, [gqa, mqa])}
    assert counts[("gpu.decode_attention.gqa", "kv_seq_len")] == 1
    assert counts[("gpu.decode_attention.mqa", "kv_seq_len")] == 0
    assert counts[("gpu.decode_attention.mqa", "q")] == 0  # a batch of one leaves its batch axis unexercised
    batched = cov.rows(decode, [gqa.replace(batch=2, mask=Mask()), mqa.replace(batch=3), mqa])
    counts = {(r.api, r.param): r.cases for r in batched}
    assert counts[("gpu.decode_attention.gqa", "q")] == 1
    assert counts[("gpu.decode_attention.mqa", "k")] == 1


def test_api_parameters_record_every_registered_implementation() -> None:
    recorded = cov.api_parameters(contract.registry().values())
    assert set(recorded) == set(contract.registry())
    json.dumps(recorded)  # plain JSON, as run.json holds it
    flash = recorded["pallas_flash"]["flash_attention.flash_attention"]
    assert flash["installed"] and "sm_scale" in flash["present"] and not flash["undeclared"]


# --- `python -m harness coverage` over a store of builder records ---

CELL_A = "20261130T000000Z-a-000001"
CELL_B = "20261130T000000Z-b-000002"
CELL_OLD = "20261130T000000Z-c-000003"


def _store(tmp_path: Path) -> Path:
    cases = [_case(seed=s, bias=bool(s % 2)) for s in range(3)]
    flash = contract.resolve("pallas_flash")
    presence = cov.api_parameters([flash])
    old = json.loads(json.dumps(presence))
    call = old["pallas_flash"]["flash_attention.flash_attention"]
    call["present"].remove("debug")
    call["absent"].append("debug")
    recs = []
    for run_id, jax in ((CELL_A, "0.10.2"), (CELL_B, "0.9.2"), (CELL_OLD, "0.7.0")):
        recs.append(
            rb.run_record(
                run_id,
                versions={"jax": jax},
                api_parameters=old if jax == "0.7.0" else presence,
                kernels=["pallas_flash"],
            )
        )
        # A bench run's summary rows name no kernel: no row of their own.
        recs.append(rb.run_record(f"{run_id}b", versions={"jax": jax}, summary=[{"benchmark": "x", "status": "ok"}]))
        drawn = cases if jax != "0.7.0" else cases[:2]
        fail = "out" if jax == "0.9.2" else None
        recs += [
            rb.case_record(run_id, c, fail_quantity=fail if c.seed == 1 else None, exercised=cov.exercised(flash, c))
            for c in drawn
        ]
    return rb.write_store(tmp_path / "store", recs)


def test_coverage_prints_each_parameter_and_each_cell(tmp_path: Path, capsys) -> None:
    store = _store(tmp_path)
    code = main(["coverage", "--store", str(store), "--implementation", "pallas_flash"])
    out = capsys.readouterr().out
    assert code == 1, out  # no stored case draws segment ids, causal, a scale or tiles: gaps
    assert "== pallas_flash: 3 cases in the store" in out
    assert "    ab " in out and "not drawn: prints the kernel's jaxpr" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("py3.11-jax")}
    assert lines["py3.11-jax0.10.2-torch2.13.0"].split()[2:5] == ["PASS", "3", "12/28"]
    assert "FAIL" in lines["py3.11-jax0.9.2-torch2.13.0"]
    # Cells in version order: 0.10.2 ran exactly 0.9.2's cases.
    assert "same cases as py3.11-jax0.9.2-torch2.13.0" in lines["py3.11-jax0.10.2-torch2.13.0"]
    assert list(lines) == [f"py3.11-jax{v}-torch2.13.0" for v in ("0.7.0", "0.9.2", "0.10.2")]
    recs = load_store([store])
    assert {r.implementation for r in cells.cell_rows(recs.runs, recs.cases)} == {"pallas_flash"}
    assert "absent here: flash_attention.flash_attention.debug" in lines["py3.11-jax0.7.0-torch2.13.0"]
    assert "same cases" not in lines["py3.11-jax0.7.0-torch2.13.0"]
    assert "flash_attention.flash_attention segment_ids" in out.split("exercised by no stored case:")[1]


def test_coverage_with_every_drawn_parameter_exercised_exits_0(tmp_path: Path, capsys) -> None:
    segs = Segments(q=(((0, 128),),), kv=(((0, 128),),))
    full = _case(bias=True, scale=0.5, mask=Mask(causal="top_left", segments=segs), blocks=cov_blocks(), residuals=True)
    run = rb.run_record(CELL_A, api_parameters=cov.api_parameters([contract.resolve("pallas_flash")]))
    rec = rb.case_record(CELL_A, full)
    del rec["exercised"]  # written before records listed it: counted from the declarations
    store = rb.write_store(tmp_path / "s", [run, rec])
    assert main(["coverage", "--store", str(store), "--implementation", "pallas_flash"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("py3.11-jax0.10.2")]
    assert line.split()[2:5] == ["PASS", "1", "28/28"], line


def cov_blocks() -> dict[str, int]:
    from kernels.pallas_flash import uniform_blocks

    return uniform_blocks()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param(lambda d: d / "nowhere", "does not exist", id="no-store"),
        pytest.param(lambda d: _broken(d), "unreadable", id="bad-json"),
        pytest.param(lambda d: _bad_case(d), "bad case", id="bad-case"),
    ],
)
def test_coverage_of_a_bad_store_is_one_line_and_exit_2(tmp_path: Path, capsys, setup, message: str) -> None:
    store = setup(tmp_path)
    assert main(["coverage", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def _broken(d: Path) -> Path:
    store = rb.write_store(d / "s", [rb.run_record(CELL_A)])
    (store / "records" / CELL_A / "x.json").write_text("{not json")
    return store


def _bad_case(d: Path) -> Path:
    rec = rb.case_record(CELL_A, _case())
    rec["case"]["head_dim"] = -1
    return rb.write_store(d / "s", [rb.run_record(CELL_A), rec])


def test_a_runs_cell_is_named_as_the_matrix_names_it() -> None:
    from harness.environments import matrix

    run = {"versions": {"python": "3.11.7", "jax": "0.10.2", "torch": "2.13.0+cpu"}}
    assert cells.cell_name(run) in {c.name for c in matrix.CELLS}
    # PyPI's CUDA build of torch, as the 3.12 and 3.13 cells install it.
    assert cells.cell_name({"versions": {"python": "3.13.0", "jax": "0.12.1", "torch": "2.15.0+cu132"}}) in {
        c.name for c in matrix.CELLS
    }
    assert cells.cell_name({"versions": {"python": "3.12.1", "jax": "0.11.2", "torch": None}}) == (
        "py3.12-jax0.11.2-torchnone"
    )
    assert cells.cell_name(None) == "unknown"
