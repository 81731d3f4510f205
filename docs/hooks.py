"""MkDocs hooks (mkdocs.yml `hooks:`): a finding's TOML metadata block shows as TOML, not as prose."""

from __future__ import annotations

FENCE = "+++"


def front_matter_as_code(markdown: str) -> str:
    """A note opening with a `+++` TOML block (harness/findings.py reads it) gets the block as a
    fenced code block under the note's title; any other page is returned unchanged."""
    lines = markdown.split("\n")
    if not lines or lines[0].strip() != FENCE:
        return markdown
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == FENCE), None)
    if end is None:
        return markdown
    block = ["```toml", *lines[1:end], "```", ""]
    rest = lines[end + 1 :]
    title = next((i for i, line in enumerate(rest) if line.strip()), None)
    if title is not None and rest[title].startswith("# "):
        return "\n".join([rest[title], "", *block, *rest[title + 1 :]])
    return "\n".join([*block, *rest])


def on_page_markdown(markdown: str, **_: object) -> str:
    return front_matter_as_code(markdown)
