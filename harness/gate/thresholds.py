"""Gate thresholds: one TOML file (harness/gate/gate_thresholds.toml) and limits parsed from strings.

A limit such as "temp_bytes:5%" becomes a `Limit` whose check names the field, the
values and the limit when it fails, as pytest-benchmark's "min:5%" does.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

from harness.core.errors import InputError

DEFAULT_FILE = Path(__file__).with_name("gate_thresholds.toml")

# Limit field -> (section of a compile record, key in it).
FIELDS: dict[str, tuple[str, str]] = {
    "temp_bytes": ("memory", "temp"),
    "argument_bytes": ("memory", "argument"),
    "output_bytes": ("memory", "output"),
    "generated_code_bytes": ("memory", "generated_code"),
    "alias_bytes": ("memory", "alias"),
    "flops": ("cost", "flops"),
    "bytes_accessed": ("cost", "bytes_accessed"),
    "transcendentals": ("cost", "transcendentals"),
    "optimal_seconds": ("cost", "optimal_seconds"),
}
_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


class ThresholdError(InputError):
    """A threshold file or limit string that cannot be used; the message names it and the fix."""


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_value(field: str, v: float) -> str:
    return fmt_bytes(v) if field.endswith("_bytes") else f"{v:.4g}"


@dataclasses.dataclass(frozen=True)
class Outcome:
    status: str  # "worse", "better" or "unchanged"
    change: float  # candidate / baseline - 1 (inf when the baseline is 0 and the candidate is not)
    message: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Limit:
    """Allowed growth of one field: `amount` percent of the baseline, or absolute units."""

    field: str
    amount: float
    percent: bool
    text: str

    @classmethod
    def parse(cls, text: str) -> Limit:
        field, sep, value = text.partition(":")
        field, value = field.strip(), value.strip().replace(" ", "")
        if not sep or not value:
            raise ThresholdError(f"limit {text!r}: expected FIELD:N% or FIELD:N, e.g. temp_bytes:5%")
        if field not in FIELDS:
            raise ThresholdError(f"limit {text!r}: unknown field {field!r}; fields: {', '.join(FIELDS)}")
        m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)(%|[KMG]i?B|B)?", value, re.IGNORECASE)
        if not m:
            raise ThresholdError(f"limit {text!r}: {value!r} is not a number, a percentage or a byte size")
        amount, unit = float(m.group(1)), (m.group(2) or "")
        if unit == "%":
            return cls(field=field, amount=amount, percent=True, text=text.strip())
        return cls(field=field, amount=amount * _UNITS[unit.lower()], percent=False, text=text.strip())

    def describe(self) -> str:
        return f"{self.amount:g}%" if self.percent else fmt_value(self.field, self.amount)

    def allowed(self, baseline: float) -> float:
        return baseline * (1 + self.amount / 100) if self.percent else baseline + self.amount

    def check(self, baseline: float, candidate: float) -> Outcome:
        """worse: grew past the limit; better: shrank by more than the limit allows growth; else unchanged."""
        change = candidate / baseline - 1 if baseline else (0.0 if candidate == baseline else float("inf"))
        pct = f"{change:+.2%}" if change != float("inf") else "from 0"
        figures = f"{fmt_value(self.field, baseline)} -> {fmt_value(self.field, candidate)}"
        if candidate > self.allowed(baseline):
            msg = f"{self.field} grew {pct} ({figures}), limit {self.describe()}"
            return Outcome("worse", change, msg)
        shrink = (baseline - candidate) / baseline * 100 if self.percent and baseline else baseline - candidate
        if candidate < baseline and shrink > self.amount:
            return Outcome("better", change, f"{self.field} shrank {pct} ({figures})")
        return Outcome("unchanged", change, f"{self.field} {pct} ({figures}), within {self.describe()}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Thresholds:
    alpha: float = 0.01
    factor: float = 1.10
    min_samples: int = 5
    fail_on_insufficient: bool = False
    limits: tuple[Limit, ...] = ()
    fail_on_missing: bool = True
    source: str = ""
    drift_factor: float = 1.5
    drift_min_used: float = 0.001
    compile_time_factor: float = 1.5

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ThresholdError(f"speed.alpha={self.alpha} must be between 0 and 1")
        if self.factor < 1:
            raise ThresholdError(f"speed.factor={self.factor} must be at least 1 (1.10 means 10% slower)")
        if self.min_samples < 2:
            raise ThresholdError(f"speed.min_samples={self.min_samples} must be at least 2: never judge one sample")
        if self.drift_factor < 1:
            raise ThresholdError(f"drift.factor={self.drift_factor} must be at least 1 (1.5 means the error grew 50%)")
        if self.compile_time_factor < 1:
            raise ThresholdError(
                f"compile_time.factor={self.compile_time_factor} must be at least 1 (1.5 means 50% slower)"
            )
        if not 0 <= self.drift_min_used < 1:
            raise ThresholdError(f"drift.min_used={self.drift_min_used} must be in [0, 1): a share of the bound")


def _get(table: dict[str, Any], section: str, key: str, kind: type, default: Any) -> Any:
    value = table.get(section, {}).get(key, default)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ThresholdError(f"{section}.{key}={value!r} must be a {kind.__name__}")
    return value


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ThresholdError(f"cannot read thresholds file {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ThresholdError(f"thresholds file {path} is not valid TOML: {e}") from None


def load(path: Path | str | None = None, *, limits: list[str] | tuple[str, ...] = ()) -> Thresholds:
    """The defaults file, overlaid by `path` if given, then by `limits` strings (each replaces its field)."""
    table = _read(DEFAULT_FILE)
    sources = [str(DEFAULT_FILE.name)]
    if path is not None:
        override = _read(Path(path))
        unknown = set(override) - set(table)
        if unknown:
            raise ThresholdError(f"thresholds file {path}: unknown sections {sorted(unknown)}; known: {sorted(table)}")
        for section, values in override.items():
            extra = set(values) - set(table[section])
            if extra:
                raise ThresholdError(f"thresholds file {path}: unknown keys {sorted(extra)} in [{section}]")
            table[section] = {**table[section], **values}
        sources.append(str(path))
    raw_limits = _get(table, "memory", "limits", list, [])
    parsed = {lim.field: lim for lim in map(Limit.parse, raw_limits)}
    for text in limits:
        lim = Limit.parse(text)
        parsed[lim.field] = lim
    if limits:
        sources.append("--limit " + " ".join(limits))
    return Thresholds(
        alpha=_get(table, "speed", "alpha", float, 0.01),
        factor=_get(table, "speed", "factor", float, 1.10),
        min_samples=_get(table, "speed", "min_samples", int, 5),
        fail_on_insufficient=_get(table, "speed", "fail_on_insufficient", bool, False),
        limits=tuple(parsed.values()),
        fail_on_missing=_get(table, "missing", "fail", bool, True),
        source=" + ".join(sources),
        drift_factor=_get(table, "drift", "factor", float, 1.5),
        drift_min_used=_get(table, "drift", "min_used", float, 0.001),
        compile_time_factor=_get(table, "compile_time", "factor", float, 1.5),
    )
