"""Answers are Markdown the model wrote (quoting whatever a tool returned): the console renders
them to HTML on the server and sanitises it, so no hostile answer can put a script, an event
handler, a `javascript:` link, a frame or an image into the page."""

from __future__ import annotations

import re
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


@pytest.mark.parametrize(
    "info",
    [
        'py" onclick="alert(1)',
        "py onclick=alert(1)",
        "x\u0022><script>alert(1)</script>",
        "javascript:alert(1)",
        "a" * 40,
        "&quot;onmouseover=alert(1)",
    ],
)
def test_a_code_language_is_never_more_than_a_class(renderer: AnswerRenderer, info: str) -> None:
    """The fence's info string is the model's text: only a plain name becomes a class."""
    html = renderer.html(f"```{info}\nls -l\n```\n")
    elements = Elements(html).tags
    assert {tag for tag, _ in elements} == {"pre", "code"}, html
    for _, attrs in elements:
        assert set(attrs) <= {"class"}, html
        for value in attrs.values():
            assert value is not None and re.fullmatch(r"language-[a-z0-9+#_.-]{1,32}", value)
    assert "onclick" not in html.split("<code")[1].split(">")[0]


def test_alignment_language_and_quotes_are_kept(renderer: AnswerRenderer) -> None:
    html = renderer.html(
        "| name | count |\n|:--|--:|\n| api | 3 |\n\n```Python\nprint(1)\n```\n\n> careful\n"
    )
    cells = [(tag, attrs.get("class")) for tag, attrs in Elements(html).tags if tag in "thtd"]
    assert cells == [("th", "align-left"), ("th", "align-right"),
                     ("td", "align-left"), ("td", "align-right")]  # fmt: skip
    assert '<code class="language-python">' in html and "<blockquote>" in html
    assert "style" not in html


def test_an_answer_being_written_shows_no_half_made_markdown(renderer: AnswerRenderer) -> None:
    steps = ["All **hea", "All **healthy**", "All **healthy**\n\n| a | b |",
             "All **healthy**\n\n| a | b |\n|--|--|\n| 1 | 2 |\n", "x\n```sh\nls"]  # fmt: skip
    shown = [renderer.live_html(text) for text in steps]
    assert shown[0] == "<p>All</p>\n"  # the ** is not closed yet: what follows it waits
    assert shown[1] == shown[2] == "<p>All <strong>healthy</strong></p>\n"  # header waits
    assert "<table>" in shown[3] and "|" not in shown[3]
    assert '<code class="language-sh">' in shown[4]  # an open fence, closed for now
    for html in shown:
        assert "**" not in html and "---" not in html
