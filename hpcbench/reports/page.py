"""A page described once as data, rendered to Markdown and to HTML.

The reports (`hpcbench report`, `compare`, `campaign report`) say what a page
holds: a title, then sections of paragraphs, bullet lists, tables and images.
This module writes that one description in both formats, escaping every piece
of text for the format it lands in, so a name from a record is shown as written
and never read as markup:

- HTML: html.escape (a name `<b>x</b>` is text, not an element).
- Markdown: `&`, `<` and `>` as character references (raw HTML in a name never
  reaches report.md as such), `[` backslash-escaped (no link; it reads as written
  in the raw file), a backslash before punctuation doubled (it escapes nothing),
  `|` in a table cell as `&#124;`
  (a row keeps its columns), line breaks folded into spaces (a heading, cell,
  item or paragraph stays one line), and a block marker at the start of a
  paragraph or item (`#`, `-`, `1.`, ...) backslash-escaped. Emphasis
  characters (`*`, `_`) are left as written, so that names like link_rate read
  the same in the raw file.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from hpcbench.core import files


@dataclass(frozen=True)
class Code:
    """A command or name the reader may copy: `code` in Markdown, <code> in HTML."""

    text: str


class Paragraph:
    """Text, with Code spans among it."""

    def __init__(self, *parts: str | Code) -> None:
        # Neighbouring texts as one, so that the first part is all the text the line opens with.
        merged: list[str | Code] = []
        for part in parts:
            if isinstance(part, str) and merged and isinstance(last := merged[-1], str):
                merged[-1] = last + part
            elif part != "":
                merged.append(part)
        self.parts = tuple(merged)


@dataclass(frozen=True)
class Bullets:
    items: Sequence[str]


@dataclass(frozen=True)
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Image:
    """A picture by its path relative to the page, and the words that stand for it."""

    src: str
    alt: str


Block = Paragraph | Bullets | Table | Image


@dataclass(frozen=True)
class Section:
    """A heading and what follows it; an empty heading continues the page (its intro,
    or more blocks after the last section's)."""

    heading: str
    blocks: Sequence[Block]
    level: int = 2


@dataclass(frozen=True)
class Page:
    title: str
    sections: Sequence[Section]
    html_title: str = ""  # the HTML <title>, if not the page's title


def write(page: Page, folder: Path, stem: str = "report") -> tuple[Path, Path]:
    """`<stem>.md` and `<stem>.html` in `folder`, each written whole (hpcbench.core.files);
    both are rendered first, so a page that cannot be rendered leaves both as they were."""
    md_text, html_text = to_markdown(page), to_html(page)
    md_path, html_path = folder / f"{stem}.md", folder / f"{stem}.html"
    files.write_atomic(md_path, md_text)
    files.write_atomic(html_path, html_text)
    return md_path, html_path


def _walk(
    page: Page, heading: Callable[[str, int], str], block: Callable[[Block], str]
) -> list[str]:
    """The page in order, each heading (the title at level 1) and block rendered."""
    out = [heading(page.title, 1)]
    for section in page.sections:
        if section.heading:
            out.append(heading(section.heading, section.level))
        out += [block(b) for b in section.blocks]
    return out


# ------------------------------------------------------------------ Markdown
def to_markdown(page: Page) -> str:
    return "\n\n".join(_walk(page, _md_heading, _md_block)) + "\n"


def _md_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        parts = [_md_inline(part) for part in block.parts]
        # Only text can open a block; a code span never does (three backticks or more
        # fence one only where the span holds backticks, which a fence's line may not).
        if parts and isinstance(block.parts[0], str):
            parts[0] = _md_line_start(parts[0])
        return "".join(parts)
    if isinstance(block, Bullets):
        return "\n".join(f"- {_md_line_start(_md_text(item))}" for item in block.items)
    if isinstance(block, Table):
        return _md_table(block.header, block.rows)
    # ']' would end the alt: escaped (a backslash before it is doubled by _md_text); a
    # trailing backslash would escape the alt's closing ']': doubled.
    alt = re.sub(r"\\$", r"\\\\", _md_text(block.alt)).replace("]", "\\]")
    return f"![{alt}]({_url(block.src)})"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(_md_text(c).replace("|", "&#124;") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(row) for row in rows)])


_MD_REFERENCES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "\\["})
# A backslash before ASCII punctuation escapes it (CommonMark 0.31, "Backslash escapes");
# before anything else it is a backslash.
_MD_ESCAPING = re.compile(r"\\(?=[!-/:-@\[-`{-~])")


def _md_text(text: str) -> str:
    """Text that Markdown shows as written: no raw HTML, no link, one line. A backslash
    that would escape what follows it (the text's own punctuation, or the `&` of a
    reference or `\\` of an escape put in here) is doubled first: it shows as one."""
    lines = text.splitlines()
    return " ".join(_MD_ESCAPING.sub(r"\\\\", x).translate(_MD_REFERENCES) for x in lines)


def _md_inline(part: str | Code) -> str:
    if isinstance(part, str):
        # A trailing backslash would escape what follows (a code span's backtick): doubled,
        # it shows as one wherever it stands.
        return re.sub(r"\\$", r"\\\\", _md_text(part))
    text = " ".join(part.text.splitlines())
    # A code span is fenced by more backticks than it holds in a row (CommonMark), and
    # padded where it starts or ends with one; nothing inside it is markup.
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_line_start(text: str) -> str:
    """A line that stays a paragraph or item: a leading marker of a heading, list, rule or
    fence is escaped (a quote's '>' is a reference already), leading spaces (an indented
    code block) dropped."""
    text = text.lstrip()
    numbered = re.match(r"\d{1,9}(?=[.)](\s|$))", text)
    if numbered:
        return f"{text[: numbered.end()]}\\{text[numbered.end() :]}"
    if text[:1] in ("#", "-", "+", "*", "_") or text[:3] in ("```", "~~~"):
        return f"\\{text}"
    return text


def _md_heading(text: str, level: int) -> str:
    text = _md_text(text).strip()
    # A closing run of '#' would be dropped from the heading: escape its last one.
    return "#" * level + " " + (f"{text[:-1]}\\#" if text.endswith("#") else text)


def _url(src: str) -> str:
    """A relative path as a link target: all but letters, digits and '/-._~' encoded (a
    space, a parenthesis, '#', '?', or a ':' that would make a scheme of its start)."""
    return quote(src, safe="/")


# ---------------------------------------------------------------------- HTML
# Every HTML page's stylesheet (the report's and the campaign's): tables ruled, figures
# right-aligned beside the label in the first column, images no wider than the page.
STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:110em}"
    "table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}img{max-width:100%}"
)


def to_html(page: Page) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>"
        f"{html.escape(page.html_title or page.title)}</title><style>{STYLE}</style>"
        "</head><body>" + "\n".join(_walk(page, _html_heading, _html_block)) + "</body></html>"
    )


def _html_heading(text: str, level: int) -> str:
    return f"<h{level}>{html.escape(text)}</h{level}>"


def _html_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        parts = (
            f"<code>{html.escape(p.text)}</code>" if isinstance(p, Code) else html.escape(p)
            for p in block.parts
        )
        return f"<p>{''.join(parts)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Table):
        return _html_table(block.header, block.rows)
    return f'<p><img src="{html.escape(_url(block.src))}" alt="{html.escape(block.alt)}"></p>'


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
