"""Every link and section reference in the top-level markdown files and docs/*.md
resolves: a markdown link's file exists and its #anchor is a heading of that file
(GitHub's anchor rule), and a `docs/X.md, "Section"` reference names a heading of
docs/X.md by its opening words. The README's first screen fits a terminal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
FIRST_SCREEN = 40  # lines
WIDTH = 100  # characters
README_LINES = 150

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", flags=re.M | re.S)
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", flags=re.M)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", flags=re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
# A reference-style link's definition: [label]: target
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?", flags=re.M)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# docs/X.md, "Section" / docs/X.md "Section" / docs/X.md ("Section")
REFERENCE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w.-]+\.md),?\s+\(?\"([^\"]+)\"")


def documents(root: Path = REPO) -> list[Path]:
    return sorted([*root.glob("*.md"), *(root / "docs").glob("*.md")])


def prose(text: str) -> str:
    """The text with fenced code blocks blanked (a link there is text), lines kept."""
    return FENCE.sub(lambda m: "\n" * m[0].count("\n"), text)


def plain(heading: str) -> str:
    """A heading's text as rendered: code spans' contents, links' text, no emphasis marks."""
    text = CODE_SPAN.sub(lambda m: m[2], heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"(?<!\w)[*_]+|[*_]+(?!\w)", "", text).strip()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text in lower case, punctuation
    dropped, spaces to '-' (gjtorikian/html-pipeline at 652bf9a,
    lib/html/pipeline/toc_filter.rb:26 `PUNCTUATION_REGEXP = /[^\\p{Word}\\- ]/u`,
    :38-41 `node.text`, `downcase`, `gsub!(PUNCTUATION_REGEXP, '')`, `gsub!(' ', '-')`;
    :43 a repeated anchor gets -1, -2, ..., which `anchors` adds)."""
    return re.sub(r"[^\w\- ]", "", plain(heading).lower()).replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [plain(h) for h in HEADING.findall(prose(path.read_text()))]


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in headings(path):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    """Each markdown link of the file whose file or anchor does not exist, as
    'file:line: target: why'."""
    text = prose(path.read_text())
    # A code span's brackets are text, not a link; blanked so the offsets keep.
    text = CODE_SPAN.sub(lambda m: " " * len(m[0]), text)
    broken = []
    matches = sorted([*LINK.finditer(text), *DEFINITION.finditer(text)], key=lambda m: m.start())
    for match in matches:
        target = match[1]
        if SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{line_of(text, match.start())}: {target}"
        if not linked.exists():
            broken.append(f"{where}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{where}: no heading with that anchor in {linked.name}")
    return broken


def names_a_heading(section: str, path: Path) -> bool:
    """The reference is a heading of the file, or its opening words."""
    return any(
        h == section or (h.startswith(section) and not h[len(section)].isalnum())
        for h in headings(path)
    )


def broken_references(path: Path, root: Path = REPO) -> list[str]:
    """Each `docs/X.md, "Section"` reference of the file whose file or heading does
    not exist, as 'file:line: reference: why'."""
    text = prose(path.read_text())
    broken = []
    for match in REFERENCE.finditer(text):
        name, section = match[1], plain(" ".join(match[2].split()))
        candidates = [root / name, path.parent / name]
        referred = next((p for p in candidates if p.is_file()), None)
        where = f'{path.relative_to(root)}:{line_of(text, match.start())}: {name}, "{section}"'
        if referred is None:
            broken.append(f"{where}: no such file")
        elif not names_a_heading(section, referred):
            broken.append(f"{where}: no such heading in {name}")
    return broken


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_markdown_link_names_a_file_and_heading_that_exist(path: Path) -> None:
    assert broken_links(path) == []


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_quoted_section_reference_names_a_heading_of_its_file(path: Path) -> None:
    assert broken_references(path) == []


def test_a_link_to_a_missing_file_or_anchor_and_a_missing_section_are_reported(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/a.md").write_text(
        "# A\n\n## `--step`: eager, graph, compile\n\n## Twice\n\n## Twice\n"
    )
    doc = tmp_path / "README.md"
    doc.write_text(
        "[ok](docs/a.md#--step-eager-graph-compile) [ok](docs/a.md#twice-1)\n"
        "[ok](#top) [gone](docs/b.md) [gone](docs/a.md#twice-2) [ref][r]\n"
        "`[code](docs/none.md)` [web](https://example.org/x.md#y)\n\n"
        "# Top\n\n"
        '(docs/a.md, "Twice") docs/a.md ("A") docs/a.md, "Tw" docs/a.md "CPU\nnodes"\n'
        '```\n[fenced](docs/none.md) docs/a.md, "Fenced"\n```\n'
        "\n[r]: docs/a.md#nothing\n[s]: docs/a.md#a\n"
    )
    assert broken_links(doc, tmp_path) == [
        "README.md:2: docs/b.md: no such file",
        "README.md:2: docs/a.md#twice-2: no heading with that anchor in a.md",
        "README.md:13: docs/a.md#nothing: no heading with that anchor in a.md",
    ]
    assert broken_references(doc, tmp_path) == [
        'README.md:7: docs/a.md, "Tw": no such heading in docs/a.md',
        'README.md:7: docs/a.md, "CPU nodes": no such heading in docs/a.md',
    ]


def test_the_readme_is_at_most_150_lines_and_its_first_screen_none_over_100_characters() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_LINES
    assert [
        (n, len(line)) for n, line in enumerate(lines[:FIRST_SCREEN], 1) if len(line) > WIDTH
    ] == []


def test_the_readmes_first_screen_gives_the_set_up_and_test_commands_alone_on_their_lines() -> None:
    screen = README.read_text().splitlines()[:FIRST_SCREEN]
    commands = [line.strip() for line in screen if line.startswith("    ")]
    assert "make campaign" in commands
    assert "make test" in commands
