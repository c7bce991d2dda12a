"""hpcbench.reports.page: one description, two formats, every piece of text shown as written;
and the two files written whole, never through a planted link (hpcbench.core.files)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.campaign import campaign_file, comparison, scoring
from hpcbench.core import paths
from hpcbench.measure.store import Store
from hpcbench.reports import page, report
from hpcbench.reports.page import Bullets, Code, Image, Page, Paragraph, Section, Table

NASTY = ["a|b", "<script>alert(1)</script>", "R&D &amp; co", "two\nlines\r\nthree", "<b>x</b>"]


class Parsed(HTMLParser):
    """The elements of an HTML page, and the text of each (by its innermost element)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.open: list[str] = []
        self.text: dict[str, list[str]] = {}
        self.alts: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.alts.append(dict(attrs)["alt"] or "")
        elif tag != "meta":
            self.open.append(tag)
            self.text.setdefault(tag, []).append("")

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, (self.open, tag)
        self.open.pop()

    def handle_data(self, data: str) -> None:
        if self.open:
            self.text[self.open[-1]][-1] += data


def one_table(header: list[str], rows: list[list[str]]) -> Page:
    return Page("t", [Section("s", [Table(header, rows)])])


def md_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def columns(row: str) -> int:
    return row.count("|") - 1


def test_awkward_cells_keep_their_columns_and_raise_no_markup_in_markdown():
    md = page.to_markdown(one_table(["name", "value"], [[cell, "1"] for cell in NASTY]))
    rows = md_rows(md)
    assert len(rows) == 2 + len(NASTY)  # header, rule, one line per row: no line break
    assert all(columns(row) == 2 for row in rows)
    assert "<" not in md and ">" not in md  # no raw HTML reaches report.md
    assert "| a&#124;b | 1 |" in rows
    assert "| &lt;script&gt;alert(1)&lt;/script&gt; | 1 |" in rows
    assert "| R&amp;D &amp;amp; co | 1 |" in rows  # '&amp;' shown as written, not as '&'
    assert "| two lines three | 1 |" in rows


def test_awkward_cells_are_text_in_html():
    parsed = Parsed(page.to_html(one_table(["<b>h</b>", "value"], [[c, "1"] for c in NASTY])))
    assert "b" not in parsed.tags and "script" not in parsed.tags
    assert parsed.tags.count("tr") == 1 + len(NASTY) and parsed.tags.count("td") == 2 * len(NASTY)
    assert parsed.text["td"][::2] == NASTY  # every cell's text as written
    assert parsed.text["th"] == ["<b>h</b>", "value"]


def test_titles_headings_paragraphs_items_and_alt_texts_are_escaped_in_both():
    name = "<b>x</b> & [a](javascript:alert(1))"
    doc = Page(
        name,
        [Section(name, [Paragraph(name), Bullets([name]), Image("p.png", name)])],
        html_title=name,
    )
    parsed = Parsed(page.to_html(doc))
    assert "b" not in parsed.tags and "a" not in parsed.tags
    assert parsed.text["title"] == parsed.text["h1"] == parsed.text["h2"] == [name]
    assert parsed.text["p"][0] == parsed.text["li"][0] == name and parsed.alts == [name]
    md = page.to_markdown(doc)
    assert "<" not in md and not re.search(r"(?<!\\)\[", md.replace("![", ""))  # no HTML, no link
    assert "# &lt;b&gt;x&lt;/b&gt; &amp; \\[a](javascript:alert(1))\n" in md


# CommonMark 0.31.2: "Backslash escapes" (any ASCII punctuation) and "Entity and numeric
# character references" (of the few the page writes): what a reader gets of plain text.
_MD_DECODED = re.compile(r"\\([!-/:-@\[-`{-~])|&(amp|lt|gt|#124);")
_MD_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "#124": "|"}


def md_decoded(text: str) -> str:
    return _MD_DECODED.sub(lambda m: m[1] or _MD_ENTITIES[m[2]], text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["a", " ", "\\", "[", "]", "(x)", "<", ">", "&", "&#91;", "&amp;", "|", "!"]
        ),
        max_size=12,
    ).map("".join)
)
def test_markdown_text_reads_as_written_with_no_link_and_no_reference_shown(text):
    cell = md_rows(page.to_markdown(one_table(["h"], [[f"x{text}x"]])))[-1][2:-2]
    para = page.to_markdown(Page("t", [Section("", [Paragraph(f"x{text}x")])])).split("\n")[2]
    for md in (cell, para):
        assert md_decoded(md) == f"x{text}x"
        # Every '[' escaped: an odd run of backslashes before it (no link can open).
        assert all(len(run) % 2 for run in re.findall(r"(\\*)\[", md)), md
    assert "&#91;" not in md_decoded(page.to_markdown(Page("t", [Section("", [Paragraph("[1]")])])))


def test_markdown_blocks_stay_what_they_are():
    blocks = [
        Paragraph("# not a heading"),
        Paragraph("1. not a list"),
        Paragraph("    not code"),
        Bullets(["- one item", "```"]),
        Paragraph("paragraph\n\n## not a heading either"),
    ]
    doc = Page("t #", [Section("h", blocks)])
    md = page.to_markdown(doc)
    assert md.startswith("# t \\#\n")  # a closing '#' would be dropped from the heading
    for line in (
        "\\# not a heading",
        "1\\. not a list",
        "not code",
        "- \\- one item",
        "- \\```",
        "paragraph  ## not a heading either",
    ):
        assert f"\n{line}\n" in md, line


def test_code_spans_hold_their_text_whatever_it_is():
    doc = Page("t", [Section("", [Paragraph("run ", Code("echo `a` <b> & c"), " then")])])
    md = page.to_markdown(doc)
    assert "run ``echo `a` <b> & c`` then" in md  # inside a code span nothing is markup
    parsed = Parsed(page.to_html(doc))
    assert parsed.text["code"] == ["echo `a` <b> & c"] and "b" not in parsed.tags
    assert parsed.text["p"] == ["run  then"]  # the code's own text is counted under <code>


def test_image_paths_are_links_to_the_file_in_both():
    doc = Page("t", [Section("", [Image("plots/00-a b(1)#?.png", "a]b\\")])])
    md = page.to_markdown(doc)
    assert "![a\\]b\\\\](plots/00-a%20b%281%29%23%3F.png)" in md
    assert '<img src="plots/00-a%20b%281%29%23%3F.png" alt="a]b\\">' in page.to_html(doc)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.text(), min_size=3, max_size=3), min_size=1, max_size=4),
    st.lists(st.text(), min_size=3, max_size=3),
)
def test_generated_text_keeps_the_columns_and_never_makes_a_tag(rows, header):
    doc = one_table(header, rows)
    md_lines = md_rows(page.to_markdown(doc))
    assert len(md_lines) == 2 + len(rows) and all(columns(line) == 3 for line in md_lines)
    assert not re.search(r"[<>]", page.to_markdown(doc))
    parsed = Parsed(page.to_html(doc))
    structure = [
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "table",
        "thead",
        "tr",
        *["th"] * 3,
        "tbody",
        *(["tr"] + ["td"] * 3) * len(rows),
    ]
    assert parsed.tags == structure


def test_write_puts_both_files_in_the_folder(tmp_path: Path):
    md_path, html_path = page.write(one_table(["a"], [["1"]]), tmp_path)
    assert (md_path, html_path) == (tmp_path / "report.md", tmp_path / "report.html")
    assert md_path.read_text().startswith("# t\n") and "<td>1</td>" in html_path.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.md"]


def test_a_page_that_cannot_be_rendered_leaves_the_old_files(tmp_path: Path):
    page.write(one_table(["a"], [["old"]]), tmp_path)
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    with pytest.raises(AttributeError):
        page.write(one_table(["a"], [[None]]), tmp_path)  # type: ignore[list-item]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before  # and no temporary


def test_links_planted_at_the_pages_are_replaced_not_written_through(tmp_path: Path):
    outside, folder = tmp_path / "outside.txt", tmp_path / "results"
    folder.mkdir()
    outside.write_text("not yours")
    for name in ("report.md", "report.html"):
        (folder / name).symlink_to(outside)
    md_path, html_path = page.write(one_table(["a"], [["1"]]), folder)
    assert outside.read_text() == "not yours"
    assert not md_path.is_symlink() and md_path.read_text().startswith("# t")
    assert not html_path.is_symlink() and html_path.read_text().startswith("<!doctype html>")


def test_the_scaling_report_and_the_campaign_page_carry_the_one_stylesheet(tmp_path: Path) -> None:
    scaling = report.report_page(Store(tmp_path / "store"), [], [], [], [], [])
    local = campaign_file.load(paths.REPO / "campaigns" / "local.yaml")
    campaign = comparison.campaign_page(local, [], {}, [], [], scoring.Forecasts({}))
    for doc in (scaling, campaign):
        assert re.findall(r"<style>(.*?)</style>", page.to_html(doc), re.S) == [page.STYLE]
