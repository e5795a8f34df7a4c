"""The release's PDF is a book one can navigate (book/release_pdf.py): a numbered contents with the page of every
chapter and page, each chapter on a new page, and bookmarks from the same headings. Printed from a small page shaped like the single-page build (one ``toctree-wrapper`` per part, a
``document-*`` marker before each document's section, part captions in the sidebar); skipped without Chromium.
"""
from __future__ import annotations

import pathlib
import re

import pytest

from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
release_pdf = load_script("sigprop_release_pdf_test", ROOT / "book" / "release_pdf.py")

FILLER = "<p>" + "A sentence of the book's prose, long enough to fill a printed line or most of one. " * 40 + "</p>"


def _document(name: str, level: int, title: str, pages: int = 1, inner: str = "") -> str:
    body = FILLER * pages
    return (f'<span id="document-{name}"></span><section id="{name.replace("/", "-")}">'
            f'<h{level}>{title}<a class="headerlink" href="#{name.replace("/", "-")}">#</a></h{level}>{body}{inner}'
            "</section>")


def _book(tmp_path: pathlib.Path) -> pathlib.Path:
    chapter = _document("ch/index", 2, "1. A chapter", inner=_document("ch/01_page", 3, "1.1. Its first page", 3)
                        + _document("ch/02_page", 3, "1.2. Its second page", 2))
    parts = [_document("book/primer", 2, "Primer", 2), chapter, _document("book/claims", 2, "2. Claims")]
    wrappers = "".join(f'<div class="toctree-wrapper compound">{p}</div>' for p in parts)
    nav = "".join(f'<p class="caption"><span class="caption-text">{c}</span></p>'
                  for c in ("Getting started", "The documents", "Appendix"))
    claims = ("<table class='sp-claims'><tr>" + "".join(f"<td>{'word ' * 30}gg2025-a-very-long-identifier-{k}</td>"
                                                          for k in range(5)) + "</tr></table>")
    # the theme's print-only header comes first: a title and the parts as headings (their bookmarks pointed at the
    # contents' page); the numbered contents replace it
    header = ('<div id="jb-print-docs-body" class="onlyprint"><h1>The theme header</h1><div id="jb-print-toc">'
              '<h2>Theme contents</h2><p aria-level="2" class="caption" role="heading">Theme part</p></div></div>')
    html = (f'<html><head><title>book</title></head><body><nav class="bd-docs-nav">{nav}</nav>{header}<main><article>'
            f'<section id="intro"><h1>The introduction</h1>{FILLER}{claims}{wrappers}</section></article></main>'
            "</body></html>")
    page = tmp_path / "book.html"
    page.write_text(html, encoding="utf-8")
    return page


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    if release_pdf.chromium() is None:
        pytest.skip("no Chromium (apt-get install chromium): the PDF is not printed")
    tmp = tmp_path_factory.mktemp("pdf")
    out = tmp / "book.pdf"
    check = release_pdf.print_pdf(_book(tmp), out, title="test", timeout=120)
    return check, out.read_bytes()


def test_contents_lists_every_chapter_and_page_with_the_page_it_is_on(printed):
    check, pdf = printed
    assert check["contents"] == 6               # the introduction, 3 documents at part level, 2 pages in the chapter
    pages = release_pdf.destination_pages(pdf)
    assert pages["intro"] == 2                  # the contents fill page 1
    # every chapter (a second-level document) starts a page of its own: nothing of the one before on it
    assert pages["book-primer"] > pages["intro"] and pages["ch-index"] > pages["book-primer"]
    assert pages["ch-01_page"] >= pages["ch-index"] and pages["ch-02_page"] > pages["ch-01_page"]
    assert pages["book-claims"] > pages["ch-02_page"] and check["pages"] >= pages["book-claims"]
    # the numbers printed in the contents are those pages: the text of page 1 holds them in order
    numbers = [pages[k] for k in ("intro", "book-primer", "ch-index", "ch-01_page", "ch-02_page", "book-claims")]
    assert numbers == sorted(numbers)


def test_pdf_has_bookmarks_from_the_headings(printed):
    _, pdf = printed
    catalog = next(o for o in release_pdf._objects(pdf).values() if re.search(rb"/Type\s*/Catalog\b", o))
    assert re.search(rb"/Outlines \d+ 0 R", catalog), "no bookmarks (document outline) in the PDF"
    titles = re.findall(rb"/Title\s*(<[0-9A-Fa-f]+>|\((?:[^()\\]|\\.)*\))", pdf)
    text = b"".join(bytes.fromhex(t[1:-1].decode()).decode("utf-16-be", "replace").encode() if t.startswith(b"<")
                    else t for t in titles)
    for title in (b"The introduction", b"1. A chapter", b"1.1. Its first page", b"2. Claims"):
        assert title in text, (title, text[:500])
    for title in (b"The theme header", b"Theme contents", b"Theme part"):
        assert title not in text, (title, text[:500])


def test_destination_pages_reads_a_page_tree_and_refuses_what_it_cannot_read():
    pdf = (b"%PDF-1.4\n1 0 obj\n<</Type /Catalog /Pages 2 0 R /Dests 5 0 R>>\nendobj\n"
           b"2 0 obj\n<</Type /Pages /Kids [6 0 R 3 0 R]>>\nendobj\n3 0 obj\n<</Type /Page>>\nendobj\n"
           b"4 0 obj\n<</Type /Page>>\nendobj\n6 0 obj\n<</Type /Pages /Kids [4 0 R]>>\nendobj\n"
           b"5 0 obj\n<</a#2Db [3 0 R /XYZ 0 0 0] /c [4 0 R /XYZ 0 0 0]>>\nendobj\n")
    assert release_pdf.destination_pages(pdf) == {"a-b": 2, "c": 1, "": 2}
    with pytest.raises(release_pdf.PrintError, match="named destinations"):
        release_pdf.destination_pages(b"%PDF-1.4\n1 0 obj\n<</Type /Catalog /Pages 2 0 R>>\nendobj\n")
