"""The one contract every kernel and oracle meets, and the registry that finds them.

An implementation is one module in `kernels/` or `oracles/` (or in a package named by
ATTN_HARNESS_KERNELS) that builds an `Implementation`, declares what it is (`About`), and calls
`register()`. The runner never names an implementation.
"""
# Long module: the whole contract an adapter fills in (Capabilities, Restriction, About, Conventions,
# Implementation) on one page, with the registry that resolves a name to one; 212 call sites name it.

from __future__ import annotations

import abc
import copy
import dataclasses
import importlib
import importlib.util
import os
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from harness.core.case import DTYPES, KV_FORMATS, REGIMES, Case
from harness.core.errors import InputError
from harness.core.locate import TileNames, declare_tiles
from harness.core.masks import MASK_COMPONENTS, RESTRICTIONS

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from harness.core.coverage import Api
    from harness.core.inputs import Inputs

Role = Literal["kernel", "oracle"]
# How an implementation fills query rows that see no key:
#   zeros:   output 0 (SDPA's math path, the harness's own reference);
#   uniform: the plain average of every value row (a finite mask value on every key);
#   convex:  some average of value rows, finite and within their range, but which rows
#            depends on the kernel's tiling, so no exact value can be declared;
#   nan:     NaN;
#   nan_or_convex: per row, all NaN or "convex" (a kernel that skips key tiles: a row whose
#            tile visits none divides 0 by 0, one that visits some averages them);
#   unwritten: the kernel never writes these rows (a paged kernel skips a sequence of length
#            0): whatever the output buffer held. Declared, recorded, and not checked; under
#            the Pallas TPU interpreter's NaN fill the adapter declares "nan" instead.
EmptyRows = Literal["zeros", "uniform", "convex", "nan", "nan_or_convex", "unwritten"]
EMPTY_ROWS: tuple[str, ...] = ("zeros", "uniform", "convex", "nan", "nan_or_convex", "unwritten")
QUANTITIES: tuple[str, ...] = ("out", "dq", "dk", "dv", "dbias", "lse", "dsinks")
GRADIENTS: tuple[str, ...] = ("dq", "dk", "dv", "dbias", "dsinks")
# The checks of the same bits (Conventions): each declared True, or a reason and the quantities it is about.
EXACT_CHECKS: dict[str, str] = {"reproducible": "rerun_varies", "batch_invariant": "batch_varies"}


class ContractError(ValueError):
    """A case outside an implementation's declared contract."""


class Refusal(str):
    """One of `Implementation.violations`' lines that is the installed library's own refusal of an input
    it can be given (a ValueError or NotImplementedError the library raises, found by the adapter's
    probe of that release): outside the contract there, yet no wrong answer. A failure file whose case
    is outside the contract by refusals alone replays as "refused" (harness.core.exit_codes.EXIT_REFUSED),
    which `bisect` counts on the good side: the release where a wrong answer became an error.
    backward: the library raises only in the backward pass, so a forward-only replay is inside the contract."""

    backward: bool

    def __new__(cls, text: str, *, backward: bool = False) -> Refusal:
        self = super().__new__(cls, text)
        self.backward = backward
        return self


def refused(problems: list[str]) -> bool:
    """Whether `problems` (a case's violations) are all refusals by the installed library, and some."""
    return bool(problems) and all(isinstance(p, Refusal) for p in problems)


def forward_only(problems: list[str]) -> list[str]:
    """`problems` less the refusals the library makes only in the backward pass (Refusal.backward)."""
    return [p for p in problems if not (isinstance(p, Refusal) and p.backward)]


class UnknownImplementation(InputError, LookupError):
    """A --kernel / --oracle name that no module registered and no MODULE:ATTR resolves."""


class NotLoadedHere(UnknownImplementation):
    """A built-in implementation whose module this environment cannot load (a package or jax API it
    lacks): the CLI exits 4, cannot run here, not 2; a caller that only resolves sees a lookup error."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What an implementation accepts; strategies draw only inside it.

    mask_components are the names from `Mask.components`, plus "bias" for an additive bias: what
    masks it is given. restrictions (harness.core.masks.RESTRICTIONS) are what it cannot take of
    them (one segment-id array for q and kv, causal only with q_len <= kv_len, ...).
    seq_lens and head_dims are the values a strategy draws from (all valid); q_lens, when
    given, are the query lengths drawn instead of seq_lens (a decode kernel's 1).
    kv_formats: K/V storage formats besides the case dtype (harness.core.case.KV_FORMATS).
    kv_format_only_dtypes: dtypes accepted only with one of kv_formats (a paged kernel whose plain
      pages of that dtype lose precision, where quantized pages do not).
    soft_cap, sinks, residuals: whether it takes a logits soft cap, attention sinks, and can
    return the logsumexp residual (harness.core.case.Case); strategies draw them only where True.
    tilings: the tiling classes its block strategy draws ("one_tile" first, when declared),
    as `Implementation.tiling` names them for a case (harness.core.features); tiling_families, (name,
    members): tilings a trigger may name as one (pallas_flash's several major or minor key blocks);
    mask_families, (name, members): mask components a trigger may name as one (splash's masks that its
    kernel computes by one mask function: causal, window, chunk).
    `Implementation.violations` is the authoritative check.
    """

    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]
    seq_lens: tuple[int, ...]
    mask_components: frozenset[str]
    restrictions: frozenset[str] = frozenset()
    max_batch: int = 2
    max_kv_heads: int = 2
    max_group: int = 4  # q_heads per kv head
    unequal_lengths: bool = True
    grads: bool = True
    dbias: bool = True
    q_lens: tuple[int, ...] = ()
    kv_formats: tuple[str, ...] = ()
    tilings: tuple[str, ...] = ()
    tiling_families: tuple[tuple[str, tuple[str, ...]], ...] = ()
    mask_families: tuple[tuple[str, tuple[str, ...]], ...] = ()
    soft_cap: bool = False
    sinks: bool = False
    residuals: bool = False
    kv_format_only_dtypes: tuple[str, ...] = ()
    # Any head_dim runs (an oracle on the dense mask): head_dims are then only what strategies draw.
    any_head_dim: bool = False
    # The value regimes (harness.core.case.REGIMES) it is held to; one left out cites its finding.
    regimes: tuple[str, ...] = REGIMES

    def __post_init__(self) -> None:
        stray = self.mask_components - MASK_COMPONENTS - {"bias"}
        if stray:
            raise ValueError(
                f"mask_components {sorted(stray)} are neither mask components nor bias; "
                f"a restriction goes in restrictions= (one of {RESTRICTIONS})"
            )
        if set(self.restrictions) - set(RESTRICTIONS):
            raise ValueError(
                f"restrictions {sorted(set(self.restrictions) - set(RESTRICTIONS))} are unknown; use {RESTRICTIONS}"
            )
        for family, members in self.tiling_families:  # two or more declared tilings, named as none of them
            if family in self.tilings or len(members) < 2 or set(members) - set(self.tilings):
                raise ValueError(f"tiling family {family!r}: {members} must be two or more of {self.tilings}")
        for family, members in self.mask_families:  # likewise of the declared mask components
            if family in MASK_COMPONENTS or len(members) < 2 or set(members) - self.mask_components:
                raise ValueError(
                    f"mask family {family!r}: {members} must be two or more of {sorted(self.mask_components)}"
                )
        if self.kv_format_only_dtypes and not self.kv_formats:
            raise ValueError(f"kv_format_only_dtypes={self.kv_format_only_dtypes} needs kv_formats to draw from")


# What a Restriction may restrict (besides "restrictions:NAME", one of harness.core.masks.RESTRICTIONS):
# the Capabilities fields that narrow what is drawn, and "violations", one check in Implementation.violations.
RESTRICTED = ("dtypes", "head_dims", "q_lens", "mask_components", "unequal_lengths", "grads", "dbias")
RESTRICTED += ("kv_format_only_dtypes", "violations")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Restriction:
    """One thing an adapter refuses or leaves undrawn, and its source, so that each release is held to
    its own contract (issue 26): the installed library asked (`probe`), the upstream check quoted as
    the installed release's source has it (`upstream` file and `check` text; tests/test_contract.py
    finds it there), a behaviour measured here (`finding`, a file under docs/ with its reproducer),
    or, for what is left undrawn though the library may take it, the harness's own `choice` (why).

    on: what it restricts (RESTRICTED, or "restrictions:NAME"); rule: what is refused, in words.
    """

    on: str
    rule: str
    probe: str = ""  # a module-level name of the adapter that reads the installed library
    upstream: str = ""  # the wrapped library's file, from its top package: "jax/experimental/..."
    check: str = ""
    finding: str = ""  # "docs/findings/....md"
    choice: str = ""  # why the harness leaves it undrawn, where the library itself refuses nothing

    def __post_init__(self) -> None:
        if self.on not in RESTRICTED and not (
            self.on.startswith("restrictions:") and self.on.split(":", 1)[1] in RESTRICTIONS
        ):
            raise ValueError(f"Restriction on={self.on!r}: one of {RESTRICTED} or restrictions:NAME ({RESTRICTIONS})")
        kinds = [k for k in ("probe", "upstream", "finding", "choice") if getattr(self, k)]
        if len(kinds) != 1 or bool(self.upstream) != bool(self.check):
            raise ValueError(
                f"Restriction {self.on}: {self.rule!r} needs one source: probe=, upstream= with check=, finding= "
                "or choice="
            )


# Where an implementation that needs hardware registers (About.needs), in words for the kernel table.
NEEDS: dict[str, str] = {"gpu": "JAX on a GPU", "cuda": "torch with CUDA", "tpu": "a TPU"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class About:
    """What an implementation says of itself outside its runs: its row of the kernel table
    (docs/kernels.md, written by `python -m docs.generate`), its matrix budget, where it runs and
    the names of its tiles. Everything the rest of the project needs of a new kernel is here.

    summary: one line, what it wraps. source: the upstream module or function (its path in the
      upstream repository, e.g. "jax/experimental/pallas/ops/tpu/flash_attention.py").
    cases: cases per matrix cell (harness.environments.matrix.EXAMPLES): the kernel's whole smoke
      set (harness.core.smoke) and at least one drawn case, from the measured CPU seconds per case
      (benchmarks/matrix_budget.py; tests/test_matrix.py holds both). 0 for an oracle.
    needs: the hardware it registers only on (a key of NEEDS), None for any host; the adapter
      passes `register(impl, here=...)` whether it is present.
    blocks: the block sizes its strategy searches, in words ("none" without a block strategy).
    notes: what the table's columns do not say (a dtype only some releases compute, ...).
    tiles: its tile names for harness.core.locate, where they are not the built-in names there.
    restrictions: every restriction it applies, each with its source (Restriction).
    """

    summary: str
    source: str
    cases: int = 0
    needs: str | None = None
    blocks: str = "none"
    notes: str = ""
    tiles: TileNames | None = None
    restrictions: tuple[Restriction, ...] = ()

    def __post_init__(self) -> None:
        if self.needs is not None and self.needs not in NEEDS:
            raise ValueError(f"needs={self.needs!r} is not one of {sorted(NEEDS)} (or None: any host)")
        if self.cases < 0:
            raise ValueError(f"cases={self.cases} must be >= 0")
        if "|" in self.summary + self.source + self.blocks + self.notes or "\n" in self.summary:
            raise ValueError(f"About of {self.summary!r}: no '|' in a table cell and one line of summary")


# What an oracle on the dense mask (harness.core.masks.dense_mask) accepts: every dtype, mask
# component and head_dim, bias, and quantized K/V (they arrive dequantized, harness.core.inputs).
# Soft cap, sinks, residuals and float64 are each oracle's own: dataclasses.replace adds them.
DENSE_ORACLE = Capabilities(
    dtypes=DTYPES,
    head_dims=(32, 64, 80, 128, 256),
    seq_lens=(16, 64, 128, 256),
    mask_components=frozenset(MASK_COMPONENTS | {"bias"}),
    kv_formats=KV_FORMATS,
    any_head_dim=True,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Conventions:
    """What an implementation does natively, and so what its adapter normalises.

    Every adapter presents the SDPA convention to the harness: softmax(QK^T*scale + bias)V,
    causal masks aligned as the case says, one head of k/v per q-head group.
    """

    bias: str  # native bias placement, e.g. "(QK^T + ab) * sm_scale"
    causal: str  # native causal alignment when q_len != kv_len
    gqa: str  # native GQA support, or how the adapter provides it
    empty_rows: EmptyRows  # see EmptyRows
    notes: str = ""
    # True where two runs of one case on fresh copies of its inputs return the same bits, outputs and
    # gradients (harness.running.determinism), else the reason they may not (atomics, a random order).
    reproducible: bool | str = True
    # Where reproducible gives a reason: the quantities it is about, held to the tolerance alone; every other
    # quantity stays bitwise. Empty: every quantity.
    rerun_varies: tuple[str, ...] = ()
    # True where a batch row's results are the same bits computed alone as in the whole batch, else why
    # not (then held to the tolerance instead) (harness.running.batch).
    batch_invariant: bool | str = True
    # Where batch_invariant gives a reason: the quantities it is about, held to the tolerance alone; every other
    # quantity stays bitwise, so a fork loses nothing upstream keeps. Empty: every quantity, as before.
    batch_varies: tuple[str, ...] = ()
    # What the exactness probe measured on the installed upstream kernel, and what it changed here, in
    # words (harness.core.exactness.refine); empty where no probe ran (the declaration as written).
    probed: str = ""

    def __post_init__(self) -> None:
        for name, varies in EXACT_CHECKS.items():
            value = getattr(self, name)
            if value is not True and not (isinstance(value, str) and value):
                raise ValueError(f"Conventions.{name}={value!r} must be True or the reason it does not hold")
            unknown = sorted(set(getattr(self, varies)) - set(QUANTITIES))
            if unknown:
                raise ValueError(f"Conventions.{varies} names {unknown}; quantities are {QUANTITIES}")
            if getattr(self, varies) and value is True:
                raise ValueError(f"Conventions.{varies}={getattr(self, varies)} needs {name} to say why, not True")

    def varies(self, check: str) -> tuple[str, ...]:
        """The quantities `check` ("reproducible" or "batch_invariant") holds to the tolerance, not to the bit."""
        if getattr(self, check) is True:
            return ()
        return getattr(self, EXACT_CHECKS[check]) or QUANTITIES

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(kw_only=True)
class Outputs:
    """Forward output and gradients as float64 numpy arrays (None where not computed).

    lse: the natural-log logsumexp of each query row's logits (sinks included),
    [batch, q_heads, q_len], when the case asks for residuals.
    dsinks: the gradient with respect to the sinks, [q_heads], when the case has sinks.
    """

    out: np.ndarray
    dq: np.ndarray | None = None
    dk: np.ndarray | None = None
    dv: np.ndarray | None = None
    dbias: np.ndarray | None = None
    lse: np.ndarray | None = None
    dsinks: np.ndarray | None = None

    def get(self, quantity: str) -> np.ndarray | None:
        return getattr(self, quantity)


class Implementation(abc.ABC):
    """One kernel or oracle. Subclasses set the class attributes and implement `run`."""

    name: str
    role: Role
    framework: str  # "jax" or "torch"
    capabilities: Capabilities
    conventions: Conventions
    description: str = ""
    about: About  # see About
    # Every parameter of the public functions it wraps (harness.core.coverage), each drawn or said why not.
    api: tuple[Api, ...] = ()
    # The built-in kernel this one is a drop-in for (`KERNEL=MODULE:ATTR`), set by `resolve`; None otherwise.
    drops_into: str | None = None
    # The implementation a copy under other conventions was made from (`with_conventions`), itself if none.
    original: Implementation | None = None

    @abc.abstractmethod
    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        """Compute the case without any contract pre-check; raise if the code refuses it."""

    def backend(self) -> str:
        """Where this implementation executes: e.g. "tpu", "tpu_interpret", "cpu", "gpu"."""
        return "cpu"

    def device(self) -> str:
        """The device it computes on, as records show it: for JAX, the kernel device for kernels and
        the CPU for oracles (harness.runtime.placement); others override when they leave the CPU."""
        if self.framework != "jax":
            return "cpu"
        from harness.runtime import placement

        return placement.describe(placement.device_for(self.role))

    def empty_rows(self, case: Case) -> EmptyRows:
        """The declared behaviour on rows with no visible key, for this case."""
        return self.conventions.empty_rows

    def padded_rows(self, case: Case) -> EmptyRows:
        """The declared behaviour on padded query rows (at or past the row's valid query length,
        harness.core.masks.Lengths.q), for this case; by default the same as any row with no visible key."""
        return self.empty_rows(case)

    def empty_row_fill(self, case: Case) -> str | None:
        """How a "uniform" row's finite fill meets its logits, which its gradient depends on
        (harness.core.emptygrads): "added" (s + fill: the gradient reaches q, k and the bias) or "replaced"
        (where(visible, s, fill): it stops at the mask). None where undeclared, or a sentence saying why
        that gradient is not judged; either way such rows then get no cotangent."""
        return None

    def mask_forms(self, case: Case) -> dict[str, Case]:
        """`case` with its mask passed each way the kernel takes one (a bool or an additive mask, a fill of -inf
        or finfo.min, lengths or a mask argument), by the form's name; {"": case} where there is one way. The
        smoke set judges the gradients of rows that see no key once per form (harness.core.smoke)."""
        return {"": case}

    def jax_fn(self, case: Case) -> Callable[..., Any] | None:
        """A JAX function of the case's arrays (q, k, v[, bias]) returning the output, in the SDPA
        convention, for ahead-of-time compilation and timing; None when there is none (e.g. torch).

        Masks that are not arrays (causal, segment ids) are closed over from the case.
        """
        return None

    def dropin(self, fn: Callable[..., Any], *, name: str) -> Implementation:
        """This adapter around `fn`, a function with the signature of the one it wraps (`KERNEL=MODULE:ATTR`):
        by default the `dropin(fn, name=...)` of the module defining the adapter's class."""
        factory = getattr(importlib.import_module(type(self).__module__), "dropin", None)
        if factory is None:
            raise UnknownImplementation(f"built-in {self.name!r} accepts no drop-in function")
        return factory(fn, name=name)

    def with_conventions(self, conventions: Conventions) -> Implementation:
        """A copy checked under `conventions` (a run's, refined by harness.running.exactness); it runs the
        same code and resolves by the same name in another process."""
        twin = copy.copy(self)
        twin.conventions, twin.original = conventions, self.original or self
        return twin

    def cannot_run(self) -> str | None:
        """Why this implementation cannot run in this environment at all (the interpreter's own
        error), probed once on a small case; None when it runs. `run` records such a kernel as
        "cannot run here" (harness.core.exit_codes.EXIT_CANNOT_RUN), never as a pass."""
        return None

    def interpreters(self) -> tuple[str, ...]:
        """The interpreters (harness.runtime.compat.INTERPRETERS) it runs under here, each found by a
        probe; empty when it is not interpreted (it runs natively, or is no Pallas TPU kernel)."""
        return ()

    def tiling(self, case: Case) -> frozenset[str]:
        """The tiling classes (Capabilities.tilings) of the case's block sizes; empty when none are declared."""
        return frozenset()

    def without_tiling(self, case: Case, tiling: str) -> Case | None:
        """`case` with its block sizes edited so that it lacks the tiling class (or tiling family) `tiling` and
        keeps the others, a family's member swapped for another (the trigger search's candidate, harness.running.
        signatures.without: the same shapes and data); None where the adapter has no such edit."""
        return None

    def block_strategy(self, case: Case) -> SearchStrategy[dict[str, int]] | None:
        """Tile sizes valid for this case's shape; None when the implementation has none."""
        return None

    def violations(self, case: Case) -> list[str]:
        """Why the case is outside the contract; empty when inside. Each names value and limit."""
        caps = self.capabilities
        out = []
        if case.dtype not in caps.dtypes:
            out.append(f"dtype={case.dtype} not in {caps.dtypes}")
        if not caps.any_head_dim and case.head_dim not in caps.head_dims:
            out.append(f"head_dim={case.head_dim} not in {caps.head_dims}")
        unsupported = (case.mask.components | ({"bias"} if case.bias else set())) - caps.mask_components
        if unsupported:
            out.append(f"mask components {sorted(unsupported)} not in {sorted(caps.mask_components)}")
        if not caps.unequal_lengths and case.q_len != case.kv_len:
            out.append(f"q_len={case.q_len} != kv_len={case.kv_len} is unsupported")
        if caps.q_lens and case.q_len not in caps.q_lens:
            out.append(f"q_len={case.q_len} not in {caps.q_lens}")
        if case.kv_format is not None and case.kv_format not in caps.kv_formats:
            out.append(f"kv_format={case.kv_format} not in {caps.kv_formats or '(none)'}")
        if case.regime not in caps.regimes:
            out.append(f"regime={case.regime} not in {caps.regimes}")
        if case.kv_format is None and case.dtype in caps.kv_format_only_dtypes:
            out.append(f"dtype={case.dtype} only with kv_format in {caps.kv_formats} (plain pages lose precision)")
        # residuals are not a violation: an implementation that returns none is simply not checked on them.
        for name in ("soft_cap", "sinks"):
            if getattr(case, name) not in (None, False) and not getattr(caps, name):
                out.append(f"{name}={getattr(case, name)} is not supported (Capabilities.{name} is False)")
        return out

    def check(self, case: Case) -> None:
        problems = self.violations(case)
        if problems:
            raise ContractError(f"{self.name}: case outside its contract: " + "; ".join(problems))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({self.role}, {self.framework})>"


_REGISTRY: dict[str, Implementation] = {}
# Every implementation the code defines, those whose hardware is absent here (register(here=False)) included.
_DEFINED: dict[str, Implementation] = {}
_DISCOVERED: set[str] = set()  # packages whose every module was imported
# Packages whose every module is imported once so that it can register(); and, per role, the
# packages that register it: oracles register from oracles/ only, so names("oracle") is known
# without importing every kernel.
PACKAGES = ("kernels", "oracles")
# Out-of-tree kernels: importable packages (comma-separated) searched like kernels/, so that a
# kernel in a team's own package is run, planned and covered by name:
#   ATTN_HARNESS_KERNELS=my_kernels python -m harness run --kernel my_kernel
EXTRA_PACKAGES_ENV = "ATTN_HARNESS_KERNELS"
PACKAGES_OF_ROLE: dict[str, tuple[str, ...]] = {"oracle": ("oracles",)}
# Frameworks an environment may lack (a matrix cell without torch, or with a jax older than
# tokamax needs, where it is not installed: harness.environments.matrix): a module that
# needs one is skipped, and `unavailable()` says which and why.
OPTIONAL_FRAMEWORKS = ("torch", "tokamax")
# The built-in kernel a bare `MODULE:ATTR` drop-in replaces (`resolve`).
DEFAULT_DROPIN_BASE = "pallas_flash"
_UNAVAILABLE: dict[str, str] = {}


def packages() -> tuple[str, ...]:
    """The packages searched for implementations: kernels/, oracles/ and those in ATTN_HARNESS_KERNELS."""
    extra = [p.strip() for p in os.environ.get(EXTRA_PACKAGES_ENV, "").split(",") if p.strip()]
    return PACKAGES + tuple(p for p in extra if p not in PACKAGES)


def _check_about(impl: Implementation, here: bool) -> None:
    about = getattr(impl, "about", None)
    if not isinstance(about, About):
        raise ValueError(f"{impl.name}: declare `about = About(summary=..., source=..., cases=...)` (contract.About)")
    if impl.role == "kernel" and about.cases < 1:
        raise ValueError(
            f"kernel {impl.name}: About.cases={about.cases}; give its matrix budget (>= its smoke set + 1)"
        )
    if not here and about.needs is None:
        raise ValueError(f"{impl.name}: register(here=False) needs About.needs (the hardware it waits for)")


def register(impl: Implementation, *, here: bool = True) -> Implementation:
    """Register `impl`; here=False defines it without registering it (its About.needs is absent on
    this host): `defined()` still lists it, for the kernel table, the matrix budgets and the tests."""
    _check_about(impl, here)
    if impl.name in _DEFINED and type(_DEFINED[impl.name]) is not type(impl):
        raise ValueError(f"implementation name {impl.name!r} is registered twice")
    _DEFINED[impl.name] = impl
    if here:
        _REGISTRY[impl.name] = impl
        if impl.about.tiles is not None:
            declare_tiles(impl.about.tiles)
    return impl


class NotInThisRelease(ImportError):
    """Raised by an adapter module at import where the installed library lacks what it wraps (an implementation
    a release dropped or has not added): the module is skipped, and `unavailable()` says why."""


def _import(module: str) -> None:
    try:
        importlib.import_module(module)
    except NotInThisRelease as e:
        _UNAVAILABLE[module] = str(e)
    except ImportError as e:
        name = e.name or ""
        if name.startswith("jax."):
            # An upstream module (or a name in one) this jax release does not have yet: not in this cell.
            _UNAVAILABLE[module] = f"this jax release lacks it: {e}"
            return
        if not isinstance(e, ModuleNotFoundError) or name.split(".")[0] not in OPTIONAL_FRAMEWORKS:
            raise
        _UNAVAILABLE[module] = f"{e.name} is not installed"
    except AttributeError as e:
        if not str(e).startswith("module 'jax"):
            raise
        _UNAVAILABLE[module] = f"this jax release lacks it: {e}"  # an API it wraps, added later (jax.nn...)


def _discover(packages_: tuple[str, ...] | None = None) -> None:
    for pkg_name in packages() if packages_ is None else packages_:
        if pkg_name in _DISCOVERED:
            continue
        _DISCOVERED.add(pkg_name)
        try:
            pkg = importlib.import_module(pkg_name)
        except ModuleNotFoundError as e:
            if pkg_name in PACKAGES or e.name != pkg_name:
                raise
            raise UnknownImplementation(
                f"{EXTRA_PACKAGES_ENV} names package {pkg_name!r}, which is not importable (is it on PYTHONPATH?)"
            ) from None
        for info in pkgutil.iter_modules(pkg.__path__):
            if not info.name.startswith("_"):
                _import(f"{pkg_name}.{info.name}")


def _builtin(name: str) -> Implementation | None:
    """The built-in `name`, importing only its own module where one is named after it
    (kernels/pallas_flash.py registers pallas_flash): a run of one kernel does not pay for
    importing every other (tokamax, and the probes some adapters run at import, ~2 CPU s)."""
    if name not in _REGISTRY and name.isidentifier():
        for pkg_name in packages():
            if pkg_name not in _DISCOVERED and importlib.util.find_spec(f"{pkg_name}.{name}") is not None:
                _import(f"{pkg_name}.{name}")
    return _REGISTRY.get(name)


def unavailable() -> dict[str, str]:
    """Implementation modules skipped because an optional framework is missing: module -> why."""
    _discover()
    return dict(_UNAVAILABLE)


def registry() -> dict[str, Implementation]:
    """A copy of the registry, every module in kernels/ and oracles/ imported."""
    _discover()
    return dict(_REGISTRY)


def defined() -> dict[str, Implementation]:
    """Every implementation the code defines, those registered only on a GPU or TPU included."""
    _discover()
    return dict(_DEFINED)


def names(role: Role | None = None) -> list[str]:
    _discover(PACKAGES_OF_ROLE.get(role or ""))
    return sorted(n for n, i in _REGISTRY.items() if role is None or i.role == role)


def resolve(spec: str) -> Implementation:
    """A built-in name, `MODULE:ATTR`, or `KERNEL=MODULE:ATTR`.

    MODULE:ATTR may name an Implementation, or a drop-in function for a built-in kernel:
    `pallas_flash` by default, or the KERNEL named before `=`, whose `Implementation.dropin` wraps it.
    """
    builtin = _builtin(spec)
    if builtin is not None:
        return builtin
    base, _, target = spec.rpartition("=")
    if ":" not in target:
        reg = registry()
        if spec in reg:
            return reg[spec]
        why = next((w for m, w in _UNAVAILABLE.items() if m.rpartition(".")[2] == spec), None)
        if why is not None:  # a built-in this environment lacks a package or jax API for
            raise NotLoadedHere(f"{spec!r} cannot run here: its module is not loaded ({why})")
        raise UnknownImplementation(
            f"unknown implementation {spec!r}; use one of {sorted(reg)}, MODULE:ATTR, or KERNEL=MODULE:ATTR"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        if (e.name or "").startswith("jax."):  # a fork of a kernel this jax release lacks, as in _import
            raise NotLoadedHere(f"{spec!r} cannot run here: this jax release lacks what it imports: {e}") from None
        raise UnknownImplementation(f"cannot import module {module_name!r} for {spec!r}: {e}") from None
    try:
        obj: Any = getattr(module, attr)
    except AttributeError:
        raise UnknownImplementation(f"module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(obj, Implementation):
        return obj
    if not callable(obj):
        raise UnknownImplementation(f"{target!r} is neither an Implementation nor a function")
    base = base or DEFAULT_DROPIN_BASE
    # A kernel registered by a module of another name (kernels/xla_attention.py registers jax_xla) is
    # found by discovering every module, as `names` lists it.
    builtin = _builtin(base) or registry().get(base)
    if builtin is None:
        raise UnknownImplementation(
            f"unknown built-in kernel {base!r} for drop-in {target!r}; known: {names('kernel')}"
        )
    impl = builtin.dropin(obj, name=spec)
    impl.drops_into = builtin.name
    return impl
