"""Answers are Markdown the model wrote (quoting whatever a tool returned): the console renders
them to HTML on the server and sanitises it, so no hostile answer can put a script, an event
handler, a `javascript:` link, a frame or an image into the page."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from bot.surfaces.console.markdown import AnswerRenderer

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",
    "<iframe src=https://evil.example></iframe>",
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<javascript:alert(1)>",
    "[x][1]\n\n[1]: javascript:alert(1)",
    "![x](https://evil.example/track.png)",
    '[x](https://ok.example "a\\" onmouseover=\\"alert(1)")',
    '<div style="background:url(javascript:alert(1))">x</div>',
    "<style>body{display:none}</style>",
    "<form action=https://evil.example><button>go</button></form>",
    "<details open ontoggle=alert(1)>",
    "`<script>` in code and ```\n<script>alert(1)</script>\n```",
    "<!-- <script>alert(1)</script> -->",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
]


@pytest.fixture(scope="module")
def renderer() -> AnswerRenderer:
    return AnswerRenderer()


class Elements(HTMLParser):
    """The elements and attributes a browser would build from the HTML."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.mark.parametrize("answer", HOSTILE)
def test_a_hostile_answer_renders_harmless(renderer: AnswerRenderer, answer: str) -> None:
    html = renderer.html(f"Here is what I found:\n\n{answer}\n")
    elements = Elements(html).tags
    assert {tag for tag, _ in elements} <= {"p", "a", "code", "pre", "strong", "em"}, html
    for tag, attrs in elements:
        assert not [name for name in attrs if name.startswith("on") or name == "style"], html
        if tag == "a" and "href" in attrs:
            assert (attrs["href"] or "").startswith(("https://", "http://", "mailto:")), html
        assert set(attrs) <= {"href", "title", "rel", "target"}, html


def test_markdown_still_renders(renderer: AnswerRenderer) -> None:
    html = renderer.html(
        "## Restarted\n\n**api** is back, see [the runbook](https://runbooks.example/api).\n\n"
        "| service | state |\n|---|---|\n| api | ok |\n\n- one\n- two\n\n```\nkubectl get pods\n```"
    )
    assert "<h2>Restarted</h2>" in html and "<strong>api</strong>" in html
    assert '<a href="https://runbooks.example/api"' in html
    assert 'rel="noopener noreferrer nofollow"' in html and 'target="_blank"' in html
    assert "<table>" in html and "<td>ok</td>" in html and "<li>one</li>" in html
    assert "<pre><code>kubectl get pods\n</code></pre>" in html


def test_text_that_looks_like_html_is_shown_as_text(renderer: AnswerRenderer) -> None:
    html = renderer.html("Use <b>bold</b> & 1 < 2")
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "&amp; 1 &lt; 2" in html
