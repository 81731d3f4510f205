"""Each implementation's API, declared parameter by parameter, and which cases exercised each.

An adapter wraps one or more public functions (and their configuration classes, such as a
kernel's BlockSizes). It declares every parameter of each as a `Param`: the values or
classes of values the strategies draw for it, and a predicate saying whether a case
exercised it; a parameter that is not drawn says why. tests/test_coverage.py holds every
declaration to the installed library's real signature, so a parameter a release adds
cannot go undeclared, and `python -m harness coverage` counts the stored cases that
exercised each parameter.

What the installed library has is read from the library itself (a signature, a dataclass's
fields, a builtin's documented signature), never from a version number: `installed()` gives
the parameter names, `accepts()` answers for one, and every run records both what exists and
what is missing where it ran (`api_parameters`, in run.json).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from harness.core.case import EXTREME_REGIMES, Case


class Implementation(Protocol):
    """What this module reads of an implementation (harness.core.contract.Implementation, which names Api)."""

    @property
    def name(self) -> str: ...

    @property
    def api(self) -> tuple[Api, ...]: ...


# A predicate on a case: whether it exercised a parameter.
Exercised = Callable[[Case], bool]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Param:
    """One parameter of a wrapped function.

    drawn: the values or classes of values the strategies draw, in words ("" when not drawn);
    exercised: whether a case used it (None when not drawn); why: the reason it is not drawn,
    required then ("needs a GPU"), or a note on a drawn one (why only one value).
    """

    name: str
    drawn: str = ""
    exercised: Exercised | None = None
    why: str = ""

    def __post_init__(self) -> None:
        if (self.exercised is None) != (not self.drawn):
            raise ValueError(f"parameter {self.name!r}: give both drawn= and exercised=, or neither (with why=)")
        if self.exercised is None and not self.why:
            raise ValueError(f"parameter {self.name!r} is not drawn: say why (why=...)")

    @property
    def is_drawn(self) -> bool:
        return self.exercised is not None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Api:
    """One public function (or configuration class) an adapter wraps, every parameter declared.

    locate: returns the installed object; raising AttributeError or ImportError means this
    library has none. read: how its parameter names are read (default: `parameters`).
    """

    name: str  # as its users write it: "jax.nn.dot_product_attention"
    params: tuple[Param, ...]
    locate: Callable[[], Any]
    read: Callable[[Any], tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{self.name}: parameters {twice} are declared twice")

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} declares no parameter {name!r}; declared: {[p.name for p in self.params]}")

    def installed(self) -> tuple[str, ...] | None:
        """The parameter names of the installed object, or None when this library has none."""
        try:
            obj = self.locate()
        except (AttributeError, ImportError):
            return None
        return (self.read or parameters)(obj)

    def presence(self) -> dict[str, Any]:
        """What exists here, as run.json records it: the declared parameters drawn, present and absent,
        and any parameter the library has that no declaration names ("undeclared": a release added it)."""
        declared = [p.name for p in self.params]
        drawn = [p.name for p in self.params if p.is_drawn]
        try:
            have = self.installed()
        except ValueError as e:  # no readable signature: recorded, never a crash of the run writing it
            return {"installed": True, "drawn": drawn, "present": [], "absent": [], "undeclared": [], "error": str(e)}
        if have is None:
            return {"installed": False, "drawn": drawn, "present": [], "absent": declared, "undeclared": []}
        return {
            "installed": True,
            "drawn": drawn,
            "present": [n for n in declared if n in have],
            "absent": [n for n in declared if n not in have],
            "undeclared": [n for n in have if n not in declared],
        }


# A builtin's signature as its docstring's first line writes it: "name(a, b=None, *, c=0) -> T".
_DOC_SIGNATURE = re.compile(r"^\s*\w+\((?P<params>[^)]*)\)", re.DOTALL)


def parameters(obj: Any) -> tuple[str, ...]:
    """Parameter names of a function (its signature), a dataclass (its fields), or a builtin whose
    signature is only in its docstring (torch's scaled_dot_product_attention)."""
    if dataclasses.is_dataclass(obj) and isinstance(obj, type):
        return tuple(f.name for f in dataclasses.fields(obj))
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        match = _DOC_SIGNATURE.match(getattr(obj, "__doc__", None) or "")
        if match is None:
            raise ValueError(f"{obj!r} has neither a signature nor one in its docstring's first line") from None
        names = (p.split("=")[0].strip() for p in match["params"].split(","))
        return tuple(n for n in names if n and n not in ("*", "/"))
    kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return tuple(name for name, p in sig.parameters.items() if p.kind not in kinds)


def accepts(fn: Any, name: str, *, forwarded: bool = True) -> bool:
    """Whether `fn` (the installed function, or a drop-in for it) takes parameter `name`: how an adapter
    asks whether this release has a feature (never from its version number).

    forwarded: whether a `**kwargs` counts as taking `name`. True (the default) where the question is
    "may the adapter pass it": a drop-in that forwards its keywords to upstream takes what upstream
    takes, and one that does not fails the case loudly. False where the name picks a calling
    convention, and so must be named (splash's is_mqa: a make_splash_mha wrapper with **kwargs must
    not be given it). A function with no readable signature (nor one in its docstring) takes nothing:
    a feature is drawn only where it is seen."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        try:
            return name in parameters(fn)
        except ValueError:
            return False
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if name in params and params[name].kind not in variadic:
        return True
    return forwarded and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def positional(*skip: str) -> Callable[[Any], tuple[str, ...]]:
    """A reader of a function's positional parameters less `skip`: a kernel object's call, whose
    keyword-only parameters its factory binds and whose first ones it fills itself (splash's
    mask infos), so the declaration lists only what a call passes."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def read(obj: Any) -> tuple[str, ...]:
        params = inspect.signature(obj).parameters.values()
        return tuple(p.name for p in params if p.kind in kinds and p.name not in skip)

    return read


# --- predicates the declarations share ---


def always(case: Case) -> bool:
    """Every case passes it (the arrays, a fixed value)."""
    return True


def component(*names: str) -> Exercised:
    """A case whose mask has any of these components (harness.core.masks names)."""
    return lambda case: bool(case.mask.components & set(names))


def has_bias(case: Case) -> bool:
    return case.bias


def explicit_scale(case: Case) -> bool:
    """A scale other than the default 1/sqrt(head_dim) (the default is passed too, as a value)."""
    return case.scale is not None


def tiled(case: Case) -> bool:
    """Explicit tile sizes (block_sizes=...) rather than the kernel's defaults."""
    return bool(case.blocks)


def block(name: str) -> Exercised:
    """A case whose blocks name this tile size or flag."""
    return lambda case: name in case.block_dict


def causal_top_left(case: Case) -> bool:
    return case.mask.causal == "top_left"


def residuals(case: Case) -> bool:
    return case.residuals


def soft_cap(case: Case) -> bool:
    return case.soft_cap is not None


def sinks(case: Case) -> bool:
    return case.sinks


def mqa(case: Case) -> bool:
    return case.kv_heads == 1


def kv_format(name: str) -> Exercised:
    return lambda case: case.kv_format == name


# Declarations several adapters make alike (the same parameter drawn the same way), written once.
SCALES_DRAWN = "1/sqrt(H), 1.0, 0.25, 0.03"  # the default and harness.core.strategies.SCALES


def arrays(q: str, k: str, v: str, *, names: tuple[str, str, str] = ("q", "k", "v")) -> tuple[Param, ...]:
    """The query, key and value every call passes, each with the layout drawn for it."""
    return tuple(Param(name=name, drawn=drawn, exercised=always) for name, drawn in zip(names, (q, k, v), strict=True))


def dot_product_arrays() -> tuple[Param, ...]:
    """query, key, value and bias of jax.nn.dot_product_attention, whose signature tokamax's shares."""
    return (
        *arrays(
            "[B, T, N, H] in the case dtype",
            "[B, S, K, H]; K divides N (GQA, MQA)",
            "[B, S, K, H]",
            names=("query", "key", "value"),
        ),
        Param(name="bias", drawn="float [B, N, T, S], or None", exercised=has_bias),
    )


def scale_param(name: str = "sm_scale") -> Param:
    """The softmax scale: the default 1/sqrt(head_dim) passed as a value, or one of the drawn scales."""
    return Param(name=name, drawn=SCALES_DRAWN, exercised=explicit_scale)


def soft_cap_param(name: str) -> Param:
    """A logits soft cap, drawn where Capabilities.soft_cap says the implementation takes one."""
    return Param(name=name, drawn="None or a cap (strategies.SOFT_CAPS)", exercised=soft_cap)


# Reasons shared by many declarations, so that the lead flips them in one place when the case
# model grows (issue 11's case engineer adds these fields).
NO_SOFT_CAP = "the case model has no logits soft cap yet"
NO_SINKS = "the case model has no attention sinks yet"
NO_RESIDUALS = "the case model does not check residuals (logsumexp, max) yet"
NO_MASK_VALUE = "the default mask value: it only shows on rows with no visible key, judged as declared"
INTERPRET_FORCED = (
    "the Pallas TPU interpreter is forced around the call (harness.runtime.compat), not through this flag"
)
DEBUG = "prints the kernel's jaxpr; no numerical effect"
LAUNCH = "Triton launch parameters: only a GPU runs Triton (the interpreter ignores them); needs a GPU"
SHARDING = "sharding across devices: the harness runs one device"


def apis_of(impl: Implementation) -> tuple[Api, ...]:
    return tuple(getattr(impl, "api", ()) or ())


@functools.cache
def _presence(api: Api) -> dict[str, Any]:
    return api.presence()


def api_parameters(impls: Iterable[Implementation]) -> dict[str, dict[str, dict[str, Any]]]:
    """implementation -> API name -> what exists where this runs (Api.presence): run.json's
    "api_parameters", so a record says which parameters existed in the cell that wrote it."""
    return {impl.name: {api.name: _presence(api) for api in apis_of(impl)} for impl in impls}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """One parameter of one implementation's API, with the stored cases that exercised it."""

    implementation: str
    api: str
    param: str
    drawn: str
    why: str
    cases: int | None  # distinct stored cases that exercised it; None when not drawn

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def exercised(impl: Implementation, case: Case) -> list[str]:
    """The drawn parameters `case` exercised, as "API.param": a case record's "exercised", so that readers
    of records (the report) count coverage without importing any kernel."""
    return [f"{api.name}.{p.name}" for api in apis_of(impl) for p in api.params if p.exercised and p.exercised(case)]


def rows(impl: Implementation, cases: Iterable[Case]) -> list[Row]:
    """Per declared parameter, how many of `cases` (distinct) exercised it."""
    distinct = list(dict.fromkeys(cases))
    out = []
    for api in apis_of(impl):
        for p in api.params:
            n = sum(1 for c in distinct if p.exercised(c)) if p.exercised is not None else None
            out.append(Row(implementation=impl.name, api=api.name, param=p.name, drawn=p.drawn, why=p.why, cases=n))
    return out


# --- what a recorded implementation name stands for ---


def declaring_name(implementation: str) -> str:
    """The built-in whose library a recorded implementation name calls, as run.json's api_parameters
    keys it: a drop-in (`KERNEL=MODULE:ATTR`, or `MODULE:ATTR` for pallas_flash) stands in for it."""
    if "=" in implementation:
        return implementation.split("=", 1)[0]
    return "pallas_flash" if ":" in implementation else implementation


# --- The checks beyond the comparison with the truth (issue 28), counted per implementation ---

# reproducible: rerun on fresh copies of the inputs (harness.running.determinism); batch_invariant: a
# batch row alone (harness.running.batch); extreme_values: an extreme value regime
# (harness.core.case.EXTREME_REGIMES); megacore: a megacore mode (kernels/pallas_paged.py).
CHECKS: tuple[str, ...] = ("reproducible", "batch_invariant", "extreme_values", "megacore")


def case_checks(case: Case) -> list[str]:
    """The checks a case makes by what it is: its value regime, a megacore mode among its blocks."""
    out = ["extreme_values"] if case.regime in EXTREME_REGIMES else []
    return out + (["megacore"] if any(name.startswith("megacore") for name, _ in case.blocks) else [])
