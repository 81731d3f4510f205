import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import contract
from harness.core.case import Case
from harness.core.contract import ContractError, UnknownImplementation, resolve
from harness.core.inputs import make_inputs
from kernels.pallas_flash import PallasFlash, uniform_blocks

FLASH = resolve("pallas_flash")
BLOCKS = uniform_blocks()


def test_registry_finds_every_module():
    names = contract.names()
    assert {"pallas_flash", "jax_reference", "torch_sdpa"} <= set(names)
    assert "pallas_flash" in contract.names("kernel") and "torch_sdpa" in contract.names("oracle")
    reg = contract.registry()
    reg.pop("pallas_flash")
    assert "pallas_flash" in contract.registry(), "registry() must return a copy"


def test_a_function_drop_in_is_wrapped_by_the_flash_adapter():
    impl = resolve("tests.planted.bwd_dkv_causal:flash_attention")
    assert isinstance(impl, PallasFlash) and impl.name == "tests.planted.bwd_dkv_causal:flash_attention"
    assert impl.fn is not FLASH.fn
    assert resolve("pallas_flash=tests.planted.bwd_dkv_causal:flash_attention").role == "kernel"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("no_such_kernel", "unknown implementation 'no_such_kernel'", id="name"),
        pytest.param("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'", id="module"),
        pytest.param("harness.core.case:nothing_here", "has no attribute 'nothing_here'", id="attr"),
        pytest.param("harness.core.case:CASE_SCHEMA", "neither an Implementation nor a function", id="not-callable"),
        pytest.param("nonesuch=harness.core.case:Case", "unknown built-in kernel 'nonesuch'", id="base"),
    ],
)
def test_unresolvable_specs_say_what_is_wrong(spec, message):
    with pytest.raises(UnknownImplementation, match=message):
        resolve(spec)


OUTSIDE = [
    pytest.param(
        Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=200, head_dim=64, blocks=BLOCKS),
        "kv_len=200",
        id="kv-not-divisible",
    ),
    # kv_len 256 takes the multi-step kernel, which checks head_dim; with one kv tile the
    # single-step kernel computes head_dim=192 correctly without checking (see README).
    pytest.param(
        Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=256, head_dim=192), "head_dim=192", id="head-dim"
    ),
    pytest.param(
        Case(
            batch=1,
            q_heads=1,
            kv_heads=1,
            q_len=128,
            kv_len=256,
            head_dim=64,
            blocks={**BLOCKS, "block_k_major": 256, "block_k": 64},
        ),
        "block_k=64",
        id="block-k-not-lane-aligned",
    ),
    pytest.param(
        Case(batch=1, q_heads=1, kv_heads=1, q_len=64, kv_len=128, head_dim=64), "q_len=64", id="q-shorter-than-block"
    ),
]


@pytest.mark.parametrize(("case", "named"), OUTSIDE)
def test_outside_the_contract_the_kernel_refuses_instead_of_returning_numbers(case, named):
    problems = FLASH.violations(case)
    assert any(named in p for p in problems), problems
    with pytest.raises(ContractError, match=named):
        FLASH.check(case)
    # The kernel itself, with no pre-check, must raise rather than compute.
    with pytest.raises(Exception) as info:  # noqa: B017 - any refusal counts, its message is checked below
        FLASH.run(case, make_inputs(case), grads=False)
    assert str(info.value).strip(), f"{type(info.value).__name__} with an empty message"


def test_unsupported_mask_component_is_outside_the_contract():
    from harness.core.masks import Mask

    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=256, head_dim=64, mask=Mask(causal="bottom_right"))
    assert any("causal_bottom_right" in p for p in FLASH.violations(case))


def test_flash_tiles_on_the_lanes_its_kernel_requires():
    # kernels/_pallas.LANES is what flash's own check calls MIN_BLOCK_SIZE ("should be a multiple of 128").
    from jax.experimental.pallas.ops.tpu import flash_attention

    from kernels import _pallas

    assert flash_attention.MIN_BLOCK_SIZE == _pallas.LANES


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param(
            {"mask_components": frozenset({"causal_top_left", "segments_shared"})},
            r"mask_components \['segments_shared'\] are neither mask components nor bias; a restriction goes in",
            id="restriction-as-component",
        ),
        pytest.param(
            {"mask_components": frozenset({"segments"}), "restrictions": frozenset({"segments"})},
            r"restrictions \['segments'\] are unknown",
            id="component-as-restriction",
        ),
    ],
)
def test_capabilities_keep_restrictions_apart_from_mask_components(kw, message):
    from harness.core.contract import Capabilities

    with pytest.raises(ValueError, match=message):
        Capabilities(dtypes=("float32",), head_dims=(64,), seq_lens=(128,), **kw)


@pytest.mark.no_mutation
def test_a_built_in_and_the_oracles_resolve_without_importing_every_kernel():
    # A run of one kernel does not import tokamax or run other adapters' import-time probes (~2 CPU s).
    code = (
        "import sys, harness; from harness.core import contract\n"
        "print(contract.resolve('pallas_flash').name, contract.names('oracle'))\n"
        "print(sorted(m for m in sys.modules if m.startswith('kernels.') and not m.startswith('kernels._')))\n"
        "print('pallas_splash' in contract.registry(), 'kernels.pallas_splash' in sys.modules)\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.splitlines() == [
        "pallas_flash ['jax_reference', 'torch_sdpa']",
        "['kernels.pallas_flash']",
        "True True",  # the whole registry, when asked for, still imports every module
    ]


class _Declared(contract.Implementation):
    """A bare implementation to register: what register() checks of its declarations."""

    role = "kernel"
    framework = "jax"
    capabilities = FLASH.capabilities
    conventions = FLASH.conventions

    def __init__(self, name: str, about: contract.About | None) -> None:
        self.name = name
        if about is not None:
            self.about = about

    def run(self, case, inputs, *, grads):
        raise NotImplementedError


@pytest.fixture
def empty_registry(monkeypatch):
    """register() into a registry of its own, tile names included, so that no other test sees it."""
    from harness.core import locate

    monkeypatch.setattr(contract, "_REGISTRY", {})
    monkeypatch.setattr(contract, "_DEFINED", {})
    monkeypatch.setattr(locate, "_TILE_NAMES", dict(locate._TILE_NAMES))


ABOUT = contract.About(summary="a kernel", source="upstream/file.py: fn", cases=3)


@pytest.mark.parametrize(
    ("about", "here", "message"),
    [
        pytest.param(None, True, r"declare `about = About\(summary=", id="no-about"),
        pytest.param(dataclasses.replace(ABOUT, cases=0), True, r"About.cases=0; give its matrix", id="no-cases"),
        pytest.param(ABOUT, False, r"register\(here=False\) needs About.needs", id="absent-without-needs"),
    ],
)
def test_register_refuses_a_kernel_that_does_not_declare_itself(empty_registry, about, here, message):
    with pytest.raises(ValueError, match=message):
        contract.register(_Declared("k", about), here=here)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param({"needs": "fpga"}, r"needs='fpga' is not one of \['cuda', 'gpu', 'tpu'\]", id="needs"),
        pytest.param({"cases": -1}, r"cases=-1 must be >= 0", id="cases"),
        pytest.param({"notes": "a | b"}, r"no '\|' in a table cell", id="pipe"),
    ],
)
def test_about_validates_itself(kw, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(ABOUT, **kw)


def test_an_out_of_tree_package_that_does_not_import_is_named(empty_registry, monkeypatch):
    monkeypatch.setenv(contract.EXTRA_PACKAGES_ENV, "no_such_kernels_pkg, kernels")
    monkeypatch.setattr(contract, "_DISCOVERED", set(contract.PACKAGES))
    assert contract.packages() == ("kernels", "oracles", "no_such_kernels_pkg")
    with pytest.raises(UnknownImplementation, match="ATTN_HARNESS_KERNELS names package 'no_such_kernels_pkg'"):
        contract.names("kernel")


def test_a_kernel_for_absent_hardware_is_defined_not_registered(empty_registry):
    contract.register(_Declared("gpu_k", dataclasses.replace(ABOUT, needs="gpu")), here=False)
    contract.register(_Declared("cpu_k", ABOUT))
    assert sorted(contract._DEFINED) == ["cpu_k", "gpu_k"] and sorted(contract._REGISTRY) == ["cpu_k"]


def test_every_implementation_declares_itself():
    for impl in contract.defined().values():
        assert isinstance(impl.about, contract.About), impl.name
        assert (impl.about.cases >= 1) == (impl.role == "kernel"), f"{impl.name}: cases={impl.about.cases}"
    absent = set(contract.defined()) - set(contract.registry())
    assert absent >= {"jax_cudnn", "torch_flash"}  # on these CPU hosts
    assert all(contract.defined()[n].about.needs for n in absent)


def test_tile_names_a_kernel_declares_are_located(empty_registry):
    from harness.core.locate import TileNames, tiling

    blocks = {"tq": 32, "tk": 64, "tk_major": 128}
    assert tiling(blocks) == tiling({})  # names the built-in table does not know
    tiles = TileNames(passes={"fwd": ("tq", None, "tk", "tk_major")})
    contract.register(_Declared("tiled", dataclasses.replace(ABOUT, tiles=tiles)))
    t = tiling(blocks)
    assert (t.q, t.q_major, t.k, t.k_major) == (32, None, 64, 128)
    assert tiling(uniform_blocks(256)).k == 256  # the built-in names still come first
    with pytest.raises(ValueError, match=r"passes are \('fwd', 'dq', 'dkv'\)"):
        TileNames(passes={"bwd": ("a", None, "b", None)})


# A whole kernel in one file: a pure-JAX attention, declared (About) and registered, nothing else.
ONE_FILE_KERNEL = '''"""softmax(QK^T * scale) V in plain JAX: a kernel that is one file of its own package."""

import jax
import jax.numpy as jnp

from harness.runtime import placement
from harness.core.contract import About, Capabilities, Conventions, Implementation, register
from harness.core.jaxvjp import jax_outputs


class TinyAttention(Implementation):
    name = "tiny_attention"
    role = "kernel"
    framework = "jax"
    about = About(summary="a tiny pure-JAX attention", source="tests/test_contract.py: ONE_FILE_KERNEL", cases=4)
    capabilities = Capabilities(
        dtypes=("float32",),
        head_dims=(32,),
        seq_lens=(16, 32),
        mask_components=frozenset({"causal_top_left"}),
        unequal_lengths=False,
    )
    conventions = Conventions(bias="none", causal="top-left", gqa="repeats k/v heads", empty_rows="zeros")

    def run(self, case, inputs, *, grads):
        group, causal = case.q_heads // case.kv_heads, "causal_top_left" in case.mask.components

        def attention(q, k, v):
            k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
            s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * case.sm_scale
            if causal:
                s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -jnp.inf)
            return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

        return jax_outputs(attention, inputs, grads=grads, device=placement.device_for(self.role))


register(TinyAttention())
'''
# `harness coverage` of the run's store (the CLI's main, as `python -m harness` calls it), then, in a cell as the
# noxfile plans it, the kernels registered there and their declared budgets, and the kernel table row. One process
# for both: each imports every implementation module (the same discovery, contract.packages()), a second time in vain.
COVERAGE_AND_PLAN = """
import sys
from harness.cli import main
print("coverage exited", main(["coverage", "--store", sys.argv[1], "--implementation", "tiny_attention"]))
from docs import generate
from harness.core import contract
from harness.environments import matrix
print([s for s in matrix.run_steps(contract.names("kernel")) if "tiny_attention" in s])
print(generate.row(contract.defined()["tiny_attention"]))
"""


@pytest.mark.no_mutation
def test_a_kernel_is_one_file(tmp_path):
    # One new file in a package of its own, on the path and named by ATTN_HARNESS_KERNELS: run, matrix
    # planning, coverage and the kernel table take it from its declarations, and no file of the project changes.
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "tiny_kernels").mkdir()
    (tmp_path / "tiny_kernels" / "tiny_attention.py").write_text(ONE_FILE_KERNEL)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(tmp_path)]),
        contract.EXTRA_PACKAGES_ENV: "tiny_kernels",
        "JAX_PLATFORMS": "cpu",
    }
    tree = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    store = tmp_path / "store"

    def harness(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *argv], cwd=root, env=env, capture_output=True, text=True)

    argv = ("--kernel", "tiny_attention", "--examples", "4", "--seed", "3", "--profile", "ci", "--no-database")
    run = harness("-m", "harness", "run", *argv, "--jobs", "1", "--out", str(store))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "tiny_attention" in run.stdout
    after = harness("-c", COVERAGE_AND_PLAN, str(store))
    assert after.returncode == 0, after.stdout[-2000:] + after.stderr[-2000:]
    *cov, steps, row = after.stdout.splitlines()
    assert cov[-1] == "coverage exited 0", after.stdout[-2000:] + after.stderr[-2000:]
    assert "== tiny_attention: 4 cases in the store" in "\n".join(cov), after.stdout
    assert "'--examples', '4'" in steps and "'--kernel', 'tiny_attention'" in steps, steps
    assert row.startswith("['`tiny_attention`', 'kernel', 'a tiny pure-JAX attention"), row
    assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout == tree


def _restricted(impl: contract.Implementation) -> list[str]:
    """What the implementation's Capabilities narrow (Restriction.on), each needing a source."""
    from harness.core.case import DTYPES
    from harness.core.masks import MASK_COMPONENTS

    caps, out = impl.capabilities, []
    out += ["dtypes"] if set(caps.dtypes) - {"float64"} != set(DTYPES) else []
    out += ["head_dims"] if not caps.any_head_dim else []
    out += ["q_lens"] if caps.q_lens else []
    out += ["mask_components"] if caps.mask_components != MASK_COMPONENTS | {"bias"} else []
    out += [f"restrictions:{r}" for r in sorted(caps.restrictions)]
    out += ["unequal_lengths"] if not caps.unequal_lengths else []
    out += ["grads"] if not caps.grads else []
    out += ["dbias"] if "bias" in caps.mask_components and not caps.dbias else []
    return out + (["kv_format_only_dtypes"] if caps.kv_format_only_dtypes else [])


def _violation_checks(cls: type) -> int:
    """The checks the adapter's own methods named *violations* add: each `append` and each listed `out + [...]`."""
    import ast
    import inspect
    import textwrap

    n = 0
    for klass in cls.__mro__:
        methods = [f for name, f in vars(klass).items() if "violations" in name and callable(f)]
        if klass.__module__.startswith("harness."):
            continue
        for node in (n for f in methods for n in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(f))))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append":
                n += 1
            elif isinstance(node, ast.BinOp) and isinstance(node.right, ast.List):
                n += len(node.right.elts)
    return n


KERNELS = [i for _, i in sorted(contract.defined().items()) if i.role == "kernel"]


@pytest.mark.parametrize("impl", KERNELS, ids=lambda i: i.name)
def test_every_restriction_of_an_adapter_is_declared_with_its_source(impl):
    # A Capabilities field that narrows the draw, or a check added to violations(), without a
    # Restriction in About.restrictions fails here: none slips in unsourced.
    declared = [r.on for r in impl.about.restrictions]
    missing = [on for on in _restricted(impl) if on not in declared]
    checks = _violation_checks(type(impl))
    assert not missing, f"{impl.name}: restrictions without a source: {missing}"
    assert declared.count("violations") == checks, f"{impl.name}: {checks} checks in violations(), sourced {declared}"


SOURCED = [
    pytest.param(impl, r, id=f"{impl.name}:{r.on}:{n}")
    for impl in KERNELS
    for n, r in enumerate(impl.about.restrictions)
]


@pytest.mark.parametrize(("impl", "restriction"), SOURCED)
def test_each_restriction_source_is_in_this_release(impl, restriction):
    # Every restriction of every adapter, listed one per test id: a probe names the adapter's reading of
    # the library, a finding its file here, and an upstream check is quoted as the installed release has it.
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    if restriction.probe:
        assert hasattr(sys.modules[type(impl).__module__], restriction.probe), restriction
    elif restriction.finding:
        assert (root / restriction.finding).is_file(), restriction
    elif restriction.choice:
        assert impl.capabilities, restriction  # the harness's own choice, listed (its reason) by this test's id
    else:
        spec = importlib.util.find_spec(restriction.upstream.split("/")[0])
        if spec is None:
            pytest.skip(f"{restriction.upstream} is not installed here")
        path = Path(next(iter(spec.submodule_search_locations))).parent / restriction.upstream
        assert path.is_file(), f"{impl.name}: {path} is not in this release"
        assert " ".join(restriction.check.split()) in " ".join(path.read_text().split()), (
            f"{impl.name}: {restriction.check!r} is not in {restriction.upstream} of this release"
        )


def test_a_built_in_kernel_whose_module_cannot_load_here_exits_4(
    monkeypatch: pytest.MonkeyPatch, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A harness gap (a package or jax API this environment lacks) is "cannot run here", never bad usage."""
    from harness import cli
    from harness.core import contract

    contract.registry()  # discovered first, so that the planted entry is not overwritten
    monkeypatch.setitem(contract._UNAVAILABLE, "kernels.gone_kernel", "gonepkg is not installed")
    code = cli.main(["run", "--kernel", "gone_kernel", "--examples", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "'gone_kernel' cannot run here: its module is not loaded (gonepkg is not installed)" in err
    assert not list(tmp_path.rglob("failures/*.json"))


@pytest.mark.parametrize("base", ["jax_xla", "tokamax_xla", "pallas_flash"])
def test_a_drop_in_names_any_built_in_kernel_even_one_registered_by_a_module_of_another_name(base):
    # jax_xla is registered by kernels/xla_attention.py: `run --kernel jax_xla=MOD:ATTR` said it was unknown.
    spec = f"{base}=tests.fixtures.dropins:NN_NAN_ONE_IN_3"
    impl = contract.resolve(spec)
    assert impl.name == spec and type(impl) is type(contract.resolve(base))
