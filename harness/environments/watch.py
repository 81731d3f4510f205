"""Every new release gated without anyone asking: which releases of the pinned packages are newer than
the pins, and the upgrades that gate them.

Planning only (`newer`, `proposals`, `constraints_with`): asking the index is
harness.environments.envs's, gating is `upgrade`'s, and the page is harness.cli.commands.watch's.
Each package's newest release is gated alone, then every package's newest together; `every_release`
gates each newer release alone too. jaxlib follows jax and is never proposed on its own.
This module imports only the standard library.
"""

from __future__ import annotations

import dataclasses
import re

from harness.environments import envs

# The pinned packages whose release can change what the harness finds: the kernels' libraries, the
# oracles', the numbers under them, and the case generator. The test tools' releases are not watched.
WATCHED = ("jax", "libtpu", "torch", "tokamax", "numpy", "ml-dtypes", "hypothesis")
# Pins that follow another package's release (the one jax[tpu]==X requires): never proposed alone.
FOLLOWERS = frozenset({"jaxlib"})


def _companions(names: list[str]) -> set[str]:
    """The packages the installer picks for the releases of `names` (envs.COMPANIONS): not set beside them."""
    return {c for n in names for c in envs.COMPANIONS.get(n, ("", ()))[1]}


def _key(version: str) -> tuple:
    """A sort key for release numbers (PEP 440's order for plain releases, pre-releases before their release)."""
    parts = []
    for piece in re.split(r"[.+!-]", version):
        m = re.fullmatch(r"(\d*)([A-Za-z]*)(\d*)", piece)
        if not m:
            parts.append((0, piece))
            continue
        num, tag, tail = m.groups()
        parts.append((int(num) if num else -1, 0 if not tag else -1, tag, int(tail) if tail else 0))
    return tuple(parts)


def pinned_version(requirement: str) -> str | None:
    """The version an exact pin names ("jax==0.12.1" -> "0.12.1"); None for a range or a wildcard."""
    m = re.fullmatch(r"\s*[A-Za-z0-9._\[\],-]+\s*==\s*([A-Za-z0-9.+!_-]+)\s*", requirement)
    return m.group(1) if m else None


def newer(pins: dict[str, str], listed: dict[str, list[str]]) -> dict[str, list[str]]:
    """name -> the listed releases newer than its pin, oldest first, for each package with any.

    pins: name -> pinned version; listed: name -> every release the index offers (any order). Pre-releases
    are left out, as pip and uv leave them out unless asked.
    """
    out = {}
    for name, versions in listed.items():
        pin = pins.get(name)
        if pin is None:
            continue
        final = [v for v in versions if not re.search(r"(a|b|rc|dev)\d*$", v)]
        later = sorted({v for v in final if _key(v) > _key(pin)}, key=_key)
        if later:
            out[name] = later
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Proposal:
    """One upgrade to gate: the releases it takes, as `upgrade --to` pins."""

    changes: tuple[tuple[str, str], ...]  # (name, version), in WATCHED order

    def __post_init__(self) -> None:
        if not self.changes:
            raise ValueError("a proposal changes at least one package")

    @property
    def label(self) -> str:
        return " ".join(f"{n}=={v}" for n, v in self.changes)

    @property
    def slug(self) -> str:
        """A directory name for the proposal's upgrade (its stores, logs and report)."""
        return "+".join(f"{n}-{v}" for n, v in self.changes).replace("/", "_")

    def to_args(self) -> list[str]:
        return [a for n, v in self.changes for a in ("--to", f"{n}=={v}")]

    @property
    def together(self) -> bool:
        return len(self.changes) > 1


def proposals(found: dict[str, list[str]], *, every_release: bool = False) -> list[Proposal]:
    """The upgrades to gate: each package's newest release alone (with every_release, each newer release
    alone), then the newest of every package together where more than one package moved."""
    order = [n for n in WATCHED if n in found] + sorted(n for n in found if n not in WATCHED)
    order = [n for n in order if n not in FOLLOWERS]
    out = []
    for name in order:
        versions = found[name] if every_release else found[name][-1:]
        out += [Proposal(changes=((name, v),)) for v in versions]
    together = [n for n in order if n not in _companions(order)]
    if len(together) > 1:
        out.append(Proposal(changes=tuple((n, found[n][-1]) for n in together)))
    return out


def constraints_with(constraints_text: str, moved: dict[str, str], *, python: str | None = None) -> str:
    """The constraints file with each pin of `moved` (name -> version: the releases taken and the companions
    the candidate's installer picked) at its new version, comments kept; with `python` (MAJOR.MINOR) outside
    its "# python:" line, that line begins at it. What a pull request taking a SAFE release changes."""
    lines = []
    for line in constraints_text.splitlines():
        name = envs._name(line) if line.strip() and not line.lstrip().startswith("#") else None
        if name in moved:
            line = f"{name}=={moved[name]}"
        elif python and (m := re.match(r"^#\s*python:\s*(.*)$", line)):
            have = re.findall(r"\b3\.\d+\b", m.group(1))
            if python not in have:
                kept = [v for v in have if tuple(map(int, v.split("."))) >= tuple(map(int, python.split(".")))]
                line = "# python: " + " ".join(sorted({python, *kept}, key=lambda v: tuple(map(int, v.split(".")))))
        lines.append(line)
    return "\n".join(lines) + "\n"
