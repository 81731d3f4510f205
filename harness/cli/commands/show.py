"""`show FILE`: draw a case's mask, its tiles, and (for a failure) where the error sits. Runs nothing.

FILE is a failure file (DIR/failures/<id>.json), a case record (STORE/records/<run>/<case>--<impl>.json)
or a case's JSON. A file written before errors were located draws the mask alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.cli import EXIT_OK, UsageError
from harness.core import strips
from harness.core.case import Case, CaseError
from harness.core.locate import Located
from harness.report import picture
from harness.store import bug_views
from harness.store.bug import Bug
from harness.store.failures import FailureRecord
from harness.store.schema import RecordError

NAME = "show"
HELP = "draw the mask, tiles and located errors of a failure file, case record or case JSON (text, --svg, --html)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="a failure file, a case record, or a case as JSON")
    p.add_argument("--svg", type=Path, metavar="OUT", help="also write the picture as an SVG file")
    p.add_argument("--html", type=Path, metavar="OUT", help="also write a self-contained HTML page with the picture")


def read(path: Path) -> tuple[Case, list[tuple[str, Located | None]], Bug | None]:
    """The case, per failing implementation its located errors (None where the file has none), and for a failure
    file the bug it holds (harness.store.bug).

    Raises UsageError (one line) for a file that is not one of the three kinds.
    """
    try:
        doc: Any = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(doc, dict):
        raise UsageError(
            f"{path}: expected a JSON object (a failure file, case record or case), got {type(doc).__name__}"
        )
    kind = doc.get("kind")
    try:
        if kind == "failure":
            failure = FailureRecord.from_json(doc, str(path))
            case = Case.from_json(failure.case)
            located = [(name, Located.from_json(doc)) for name, doc in failure.failed_located()]
            return case, located or [(failure.kernel, None)], Bug.of(failure, path)
        if kind == "case":
            case = Case.from_json(doc.get("case"))
            return case, [(str(doc.get("implementation")), Located.from_json(doc.get("located")))], None
        if kind is not None:
            raise UsageError(f"{path}: a {kind!r} record has no case to draw; give a failure file, case record or case")
        return Case.from_json(doc), [], None
    except CaseError as e:
        raise UsageError(f"{path}: bad case: {e}") from None
    except RecordError as e:
        raise UsageError(str(e)) from None


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def main(args: argparse.Namespace) -> int:
    case, located, bug = read(args.file)
    if bug is not None:
        print(bug_views.text(bug))
    if not located:
        print(strips.mask_text(case))
    for name, loc in located:
        print(f"== {name}")
        print(strips.mask_text(case, loc))
        if loc is None:
            print("no located errors in this file (written before errors were located, or the implementation raised)")
    first = located[0][1] if located else None
    if args.svg:
        _write(args.svg, str(picture.picture(case, first)))
        print(f"svg -> {args.svg}")
    if args.html:
        title = f"{args.file.name}: {located[0][0]}" if located else args.file.name
        _write(args.html, picture.page(case, first, title=title))
        print(f"html -> {args.html}")
    return EXIT_OK
