"""Where an error sits: full arrays in, small located summaries out. Pure (numpy only).

A failing comparison says how large the worst error is; a Located says where it is. Each
quantity's error against the truth is reduced along the axis it belongs to:

  out, dq   per query row   (its error sums over every key the row sees)
  dk, dv    per key row     (its error sums over every query that sees the key)
  dbias     per query row, and per (query tile, key tile): the only quantity with both axes

The error of `out` at a row cannot be split by key tile from the outputs alone, so the
(query tile, key tile) grid is kept for dbias only. Every value is max |got - truth| over
the reduced elements divided by the quantity's tolerance bound (the Comparison's), so a
value past 1 is past the bound. Non-finite values where the truth is finite are counted
apart; a row that was not judged (an empty row of `out`, judged against its declared
convention instead) is None.

One batch row is kept: the one with the largest error (the mask may differ per batch row,
with segments, and a picture draws one). Axes longer than MAX_CELLS are pooled by max in
groups of `stride` rows, so a summary stays a few kilobytes whatever the case.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from harness.core.numbers import multiple

LOCATE_SCHEMA = 1
# Values kept per axis and head: a shrunk case has at most a few hundred rows, drawn whole;
# longer axes are pooled so that a failure file stays small (4 quantities x 4 heads x 256
# values is ~30 KB of JSON).
MAX_CELLS = 256
QUERY_AXIS = ("out", "dq", "dbias")
KEY_AXIS = ("dk", "dv")

# Tile sizes per pass, by the names the kernels give them (kernels/*.py *_BLOCKS): the first
# name present wins. (minor query, major query, minor key, major key). These are the built-in
# kernels' names, known to every reader of records (a report imports no kernel); a kernel that
# names its tiles otherwise declares them (contract.About.tiles), and registering it adds them here.
_TILE_NAMES: dict[str, tuple[tuple[str, ...], ...]] = {
    "fwd": (("block_q",), ("block_q",), ("block_k", "block_kv_compute", "block_kv"), ("block_k_major", "block_kv")),
    "dq": (("block_q_dq",), ("block_q_dq",), ("block_k_dq", "block_kv_dq"), ("block_k_major_dq", "block_kv_dq")),
    "dkv": (
        ("block_q_dkv",),
        ("block_q_major_dkv", "block_q_dkv"),
        ("block_k_dkv", "block_kv_dkv_compute", "block_kv_dkv"),
        ("block_k_major_dkv", "block_kv_dkv"),
    ),
}
PASSES = tuple(_TILE_NAMES)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TileNames:
    """A kernel's block-size names of its tiles, per pass ("fwd", "dq", "dkv"): each a tuple
    (minor query, major query, minor key, major key) of a name or None (no such tile); a major
    tile it does not have is its minor one."""

    passes: dict[str, tuple[str | None, str | None, str | None, str | None]]

    def __post_init__(self) -> None:
        for pass_, names in self.passes.items():
            if pass_ not in PASSES or len(names) != 4:
                raise ValueError(f"TileNames {pass_}={names}: passes are {PASSES}, each (q, q_major, k, k_major)")


def declare_tiles(names: TileNames) -> None:
    """Add a registered kernel's tile names after the built-in ones (harness.core.contract.register)."""
    for pass_, slots in names.passes.items():
        table = _TILE_NAMES[pass_]
        _TILE_NAMES[pass_] = tuple(
            have if name is None or name in have else (*have, name) for have, name in zip(table, slots, strict=True)
        )


PASS_OF = {"out": "fwd", "dbias": "fwd", "dq": "dq", "dk": "dkv", "dv": "dkv"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tiling:
    """A pass's tile sizes along the query and key axes; None where the case names none."""

    q: int | None = None
    q_major: int | None = None
    k: int | None = None
    k_major: int | None = None

    def along(self, axis: str) -> tuple[int | None, int | None]:
        return (self.q, self.q_major) if axis == "query" else (self.k, self.k_major)


def tiling(blocks: dict[str, int], pass_: str = "fwd") -> Tiling:
    """The tiles of one pass ("fwd", "dq" or "dkv") from a case's block sizes."""

    def first(names: tuple[str, ...]) -> int | None:
        return next((int(blocks[n]) for n in names if n in blocks), None)

    q, qm, k, km = (first(names) for names in _TILE_NAMES[pass_])
    return Tiling(q=q, q_major=qm, k=k, k_major=km)


def _round(x: float) -> float:
    return float(f"{x:.3g}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Strip:
    """One quantity's error along its axis, in units of its bound, for the kept batch row.

    values[h][i]: max err/bound over rows i*stride .. (i+1)*stride - 1 of head h (None: not judged).
    nonfinite: (head, cell, count) for every cell holding values that are not finite where the truth is.
    tiles[h][t]: max err/bound over tile t (of `tile` rows) of head h; grid[h][r][c] (dbias only):
    over query tile r and key tile c.
    """

    quantity: str
    axis: str  # "query" or "key"
    length: int
    stride: int
    bound: float
    values: tuple[tuple[float | None, ...], ...]
    nonfinite: tuple[tuple[int, int, int], ...] = ()
    tile: int | None = None
    tiles: tuple[tuple[float | None, ...], ...] = ()
    grid: tuple[tuple[tuple[float | None, ...], ...], ...] = ()

    def __post_init__(self) -> None:
        # A strip read from a file is drawn without further checks, so it must be whole.
        if self.axis not in ("query", "key"):
            raise ValueError(f"strip axis={self.axis!r} must be 'query' or 'key'")
        if (
            self.length < 1
            or self.stride < 1
            or (self.tile is not None and (type(self.tile) is not int or self.tile < 1))
        ):
            raise ValueError(f"strip {self.length=}, {self.stride=}, {self.tile=} must be positive")
        cells = -(-self.length // self.stride)
        for row in self.values:
            if len(row) != cells or not all(v is None or isinstance(v, int | float) for v in row):
                raise ValueError(f"strip {self.quantity!r} needs {cells} numbers or nulls per head")
        for h, c, n in self.nonfinite:
            if not (0 <= h < len(self.values) and 0 <= c < cells and n > 0):
                raise ValueError(f"strip {self.quantity!r} non-finite entry {(h, c, n)} is out of range")

    @property
    def heads(self) -> int:
        return len(self.values)

    @property
    def worst(self) -> float:
        """The largest err/bound, inf when any value is non-finite."""
        if self.nonfinite:
            return math.inf
        return max((v for row in self.values for v in row if v is not None), default=0.0)

    def past(self) -> list[tuple[int, int]]:
        """(head, cell) of every cell past the bound or holding a non-finite value."""
        bad = {(h, c) for h, c, _ in self.nonfinite}
        bad |= {(h, c) for h, row in enumerate(self.values) for c, v in enumerate(row) if v is not None and v > 1}
        return sorted(bad)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["nonfinite"] = [list(t) for t in self.nonfinite]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Strip:
        def grid(x: Any) -> tuple:
            return tuple(grid(v) for v in x) if isinstance(x, list) else x

        return cls(
            quantity=str(d["quantity"]),
            axis=str(d["axis"]),
            length=int(d["length"]),
            stride=int(d["stride"]),
            bound=float(d["bound"]),
            values=grid(d["values"]),
            nonfinite=tuple(tuple(int(v) for v in t) for t in d.get("nonfinite", [])),
            tile=d.get("tile"),
            tiles=grid(d.get("tiles", [])),
            grid=grid(d.get("grid", [])),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Located:
    """Every located quantity of one implementation on one case; `batch` is the batch row kept."""

    batch: int
    per_batch: tuple[float, ...]  # worst err/bound per batch row over every quantity (inf: non-finite)
    strips: tuple[Strip, ...]

    def strip(self, quantity: str) -> Strip | None:
        return next((s for s in self.strips if s.quantity == quantity), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": LOCATE_SCHEMA,
            "batch": self.batch,
            "per_batch": [b if math.isfinite(b) else str(b) for b in self.per_batch],
            "strips": [s.to_json() for s in self.strips],
        }

    @classmethod
    def from_json(cls, d: Any) -> Located | None:
        """None for anything this version cannot read (a newer schema, a damaged file): no picture, no crash."""
        if not isinstance(d, dict) or d.get("schema") != LOCATE_SCHEMA:
            return None
        try:
            return cls(
                batch=int(d["batch"]),
                per_batch=tuple(float(b) for b in d["per_batch"]),
                strips=tuple(Strip.from_json(s) for s in d["strips"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _pool(a: np.ndarray, stride: int, axis: int, fill: float) -> np.ndarray:
    """Max over groups of `stride` along `axis` (the last group may be short)."""
    n = a.shape[axis]
    cells = -(-n // stride)
    pad = cells * stride - n
    if pad:
        widths = [(0, 0)] * a.ndim
        widths[axis] = (0, pad)
        a = np.pad(a, widths, constant_values=fill)
    shape = a.shape[:axis] + (cells, stride) + a.shape[axis + 1 :]
    return a.reshape(shape).max(axis=axis + 1)


def _values(err: np.ndarray, judged: np.ndarray) -> tuple[tuple[float | None, ...], ...]:
    return tuple(
        tuple(_round(float(v)) if j else None for v, j in zip(row, jrow, strict=True))
        for row, jrow in zip(err, judged, strict=True)
    )


def _errors(got: np.ndarray, truth: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """(err/bound with non-finite entries as 0, non-finite-where-truth-is-finite mask), same shape."""
    bad = ~np.isfinite(got) & np.isfinite(truth)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got - truth) / bound
    return np.where(np.isfinite(err), err, 0.0), bad


def locate_quantity(
    quantity: str,
    got: np.ndarray,
    truth: np.ndarray,
    bound: float,
    *,
    batch: int,
    judged: np.ndarray | None = None,
    tiles: Tiling = Tiling(),
) -> Strip:
    """One quantity at one batch row. got, truth: [B, H, L, D] ([B, H, Lq, Lk] for dbias);
    judged: bool [B, H, L] of the rows the comparison judged (default all)."""
    axis = "key" if quantity in KEY_AXIS else "query"
    err, bad = _errors(got[batch], truth[batch], bound)
    judged_rows = np.ones(err.shape[:2], bool) if judged is None else judged[batch]
    err = np.where(judged_rows[..., None], err, 0.0)
    bad &= judged_rows[..., None]
    row_err, row_bad = err.max(axis=-1), bad.sum(axis=-1)  # [H, L]
    length = row_err.shape[1]
    stride = -(-length // MAX_CELLS)
    cell_err = _pool(row_err, stride, 1, 0.0)
    cell_judged = _pool(judged_rows, stride, 1, False)
    cell_bad = _pool(np.cumsum(row_bad, axis=1), stride, 1, 0)  # cumulative: max is the count up to the cell end
    cell_bad = np.diff(cell_bad, axis=1, prepend=0)
    nonfinite = tuple((int(h), int(c), int(cell_bad[h, c])) for h, c in zip(*np.nonzero(cell_bad), strict=True))
    tile, _ = tiles.along(axis)
    tile_vals: tuple = ()
    if tile and tile < length:
        tile_vals = _values(_pool(row_err, tile, 1, 0.0), _pool(judged_rows, tile, 1, False))
    grid: tuple = ()
    if quantity == "dbias" and tiles.q and tiles.k:
        g = _pool(_pool(err, tiles.q, 1, 0.0), tiles.k, 2, 0.0)  # [H, q tiles, k tiles]
        grid = tuple(tuple(tuple(_round(float(v)) for v in row) for row in head) for head in g)
    return Strip(
        quantity=quantity,
        axis=axis,
        length=length,
        stride=stride,
        bound=_round(bound),
        values=_values(cell_err, cell_judged),
        nonfinite=nonfinite,
        tile=tile,
        tiles=tile_vals,
        grid=grid,
    )


def worst_batch(arrays: list[tuple[np.ndarray, np.ndarray, float]]) -> tuple[int, tuple[float, ...]]:
    """(the batch row with the largest err/bound, err/bound per batch row) over (got, truth, bound) triples."""
    per: np.ndarray | None = None
    for got, truth, bound in arrays:
        err, bad = _errors(got, truth, bound)
        b = err.reshape(err.shape[0], -1).max(axis=1, initial=0.0)
        b = np.where(bad.reshape(bad.shape[0], -1).any(axis=1), np.inf, b)
        per = b if per is None else np.maximum(per, b)
    if per is None:
        return 0, ()
    return int(np.argmax(per)), tuple(_round(float(v)) if np.isfinite(v) else math.inf for v in per)


def locate(
    got: dict[str, np.ndarray | None],
    truth: dict[str, np.ndarray | None],
    bounds: dict[str, float],
    *,
    blocks: dict[str, int],
    judged_out: np.ndarray | None = None,
) -> Located | None:
    """Locate every quantity present in got, truth and bounds (a usable bound: finite, > 0).

    judged_out: bool [B, H, Lq], the rows `out` was judged on (the rows that see a key).
    None when nothing can be located.
    """
    usable = [
        q
        for q in ("out", "dq", "dk", "dv", "dbias")
        if got.get(q) is not None
        and truth.get(q) is not None
        and got[q].shape == truth[q].shape
        and math.isfinite(bounds.get(q, math.nan))
        and bounds[q] > 0
    ]
    if not usable:
        return None
    batch, per_batch = worst_batch([(got[q], truth[q], bounds[q]) for q in usable])
    strips = tuple(
        locate_quantity(
            q,
            got[q],
            truth[q],
            bounds[q],
            batch=batch,
            judged=judged_out if q == "out" else None,
            tiles=tiling(blocks, PASS_OF[q]),
        )
        for q in usable
    )
    return Located(batch=batch, per_batch=per_batch, strips=strips)


def runs(cells: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs (first, last) of sorted cell indices."""
    out: list[tuple[int, int]] = []
    for c in cells:
        if out and c == out[-1][1] + 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


def where(strip: Strip, *, max_runs: int = 3) -> str:
    """One line: where this quantity is past its bound, or that it is within it."""
    noun = "q rows" if strip.axis == "query" else "k rows"
    past = strip.past()
    if not past:
        return f"{strip.quantity}: within the bound everywhere (worst {multiple(strip.worst)}x)"
    cells = sorted({c for _, c in past})
    heads = sorted({h for h, _ in past})
    spans = []
    for a, b in runs(cells)[:max_runs]:
        lo, hi = a * strip.stride, min((b + 1) * strip.stride, strip.length) - 1
        spans.append(f"{lo}" if lo == hi else f"{lo}-{hi}")
    more = len(runs(cells)) - max_runs
    rows = ", ".join(spans) + (f" and {more} more runs" if more > 0 else "")
    n_rows = sum(min((c + 1) * strip.stride, strip.length) - c * strip.stride for c in cells)
    head_text = f"head {heads[0]}" if len(heads) == 1 else f"heads {','.join(map(str, heads))}"
    if len(heads) == strip.heads and strip.heads > 1:
        head_text = f"all {strip.heads} heads"
    tile_text = ""
    if strip.tile and strip.tiles:
        bad_tiles = sorted({t for row in strip.tiles for t, v in enumerate(row) if v is not None and v > 1})
        bad_tiles = sorted(set(bad_tiles) | {c * strip.stride // strip.tile for _, c, _ in strip.nonfinite})
        n_tiles = len(strip.tiles[0])
        plural = "s" if len(bad_tiles) > 1 else ""
        tile_text = f"; in {strip.axis} tile{plural} {_list(bad_tiles)} of 0-{n_tiles - 1} ({strip.tile} rows each)"
    finite = max((v for row in strip.values for v in row if v is not None), default=0.0)
    nf = sum(n for _, _, n in strip.nonfinite)
    worst = f"worst {multiple(finite)}x the bound"
    worst = f"{nf} non-finite values, worst finite error {multiple(finite)}x" if nf else worst
    return (
        f"{strip.quantity}: past the bound in {n_rows} of {strip.length} {noun} ({rows}), {head_text}"
        f"{tile_text}; {worst}"
    )


def _list(xs: list[int]) -> str:
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs(xs)) or "none"
