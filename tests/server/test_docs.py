"""The documentation matches the code it describes, and holds together (docs must not drift).

The environment table (docs/configuration.md) lists every setting, the route table
(docs/console.md) every route, the README's command table every command and option of
`chatops --help`; the README stays short, and no relative link points nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import Settings
from bot.server import create_app
from tests.slack.workspaces import CREDENTIALS_KEY

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200


def _section(path: Path, title: str) -> str:
    """The text under the heading `title` (any level), up to the next heading of that level."""
    text = path.read_text()
    match = re.search(rf"^(#+) {re.escape(title)}\n", text, flags=re.MULTILINE)
    assert match, f"{path.name} has no section {title!r}"
    level = match.group(1)
    end = re.search(rf"^#{{1,{len(level)}}} ", text[match.end() :], flags=re.MULTILINE)
    return text[match.start() : match.end() + end.start() if end else None]


def test_environment_table_lists_every_setting_once() -> None:
    table = _section(DOCS / "configuration.md", "Environment")
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \|", table, flags=re.MULTILINE)
    assert sorted(rows) == sorted(name.upper() for name in Settings.model_fields)


def test_route_table_lists_every_route(make_settings) -> None:
    table = _section(DOCS / "console.md", "HTTP routes (`chatops serve`)")
    documented = set(re.findall(r"^\| `(GET|POST) ([^`]+)` \|", table, re.M))
    feishu = {"feishu_app_id": "cli_1", "feishu_app_secret": "s",
              "feishu_verification_token": "v", "feishu_encrypt_key": "k"}  # fmt: skip
    single_token = make_settings(slack_bot_token="xoxb-1", slack_signing_secret="s", **feishu)
    # the OAuth installs' routes are served only in that mode (`SLACK_CLIENT_ID`, ...)
    installs = make_settings(slack_client_id="1.2", slack_client_secret="c",
                             slack_signing_secret="s", chatops_credentials_key=CREDENTIALS_KEY,
                             **feishu)  # fmt: skip
    served = {
        (route.method, route.resource.canonical)
        for settings in (single_token, installs)
        for route in create_app(settings).router.routes()
        if route.method in ("GET", "POST") and route.resource is not None
    }
    assert served == documented


# --- the command line --------------------------------------------------------------------


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """`chatops ARGV --help` through the real entry point."""
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def _usage(help_text: str) -> str:
    return help_text.split("\n\n", 1)[0]


def _verbs(help_text: str) -> list[str]:
    """Sub-commands listed under the COMMAND / VERB positional of a help text."""
    return re.findall(r"^    ([a-z][a-z-]*)(?: |$)", help_text, flags=re.MULTILINE)


def _words(usage: str) -> set[str]:
    """Options and positional names a usage line shows (not `--help`, not option metavars)."""
    options = set(re.findall(r"(--[a-z][a-z-]*)", usage)) - {"--help"}
    bare = re.sub(r"(-{1,2}[a-z][a-z-]*)( [A-Z_]+)?", r"\1", usage.split(":", 1)[1])
    return options | set(re.findall(r"\b([A-Z][A-Z_]+)\b", bare))


def _names(row: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", row) is not None


def test_command_table_matches_chatops_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Every sub-command of `chatops --help`, and every option and argument its own `--help`
    shows, is in the README's command table, in that command's row; and the row names no
    option the command does not have."""
    table = _section(README, "Command line")
    commands = _verbs(_help(capsys))
    assert commands, "chatops --help lists no sub-command"
    for command in commands:
        rows = [r for r in table.splitlines() if r.startswith(f"| `chatops {command} ")]
        assert len(rows) == 1, f"the README's command table has no single row for {command}"
        row = rows[0].split(" | ")[0]
        help_text = _help(capsys, command)
        expected = _words(_usage(help_text))
        for verb in _verbs(help_text):
            assert _names(row, verb), f"chatops {command} {verb} is not in the README"
            expected |= _words(_usage(_help(capsys, command, verb)))
        expected -= {"COMMAND", "VERB"}
        missing = sorted(word for word in expected if not _names(row, word))
        assert not missing, f"chatops {command}: {missing} not in the README's command table"
        options = {w for w in expected if w.startswith("--")}
        unknown = set(re.findall(r"(--[a-z][a-z-]*)", row)) - options
        assert not unknown, f"the README documents {sorted(unknown)} that chatops {command} lacks"


# --- shape and links ---------------------------------------------------------------------


def test_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines"


def _outside_code(text: str) -> list[str]:
    """Lines outside fenced code blocks, with inline code removed."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return kept


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = re.match(r"^#{1,6} (.+)$", line)
        if fenced or not heading:
            continue
        slug = _slug(heading.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(path: Path, root: Path) -> list[str]:
    """Relative links in a Markdown file whose file, or heading, does not exist."""
    broken = []
    for line in _outside_code(path.read_text()):
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.is_relative_to(root) or not linked.exists():
                broken.append(f"{path.name}: {target} (no such file)")
            elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
                broken.append(f"{path.name}: {target} (no such heading)")
    return broken


def _documents() -> list[Path]:
    return [README, ROOT / "bench" / "README.md", *sorted(DOCS.glob("*.md"))]


def test_every_relative_link_points_at_a_file_and_heading() -> None:
    assert len(list(DOCS.glob("*.md"))) >= 10
    broken = [b for doc in _documents() for b in broken_links(doc, ROOT)]
    assert not broken, broken


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {
        (README.parent / t.partition("#")[0]).resolve()
        for t in re.findall(r"\]\(([^)#\s]+)", "\n".join(_outside_code(README.read_text())))
    }
    assert not [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked]


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## HTTP routes (`chatops serve`)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Same heading\n\n## Same heading\n\n"
        "[ok](other.md#http-routes-chatops-serve) [ok](#same-heading-1) [ok](https://x.y/#z)\n"
        "`[code](nowhere.md)`\n\n```\n[fenced](nowhere.md)\n```\n"
        "[gone](missing.md) [bad](other.md#no-such-heading) [bad](#same-heading-2)\n"
        "[out](../../etc/passwd)\n"
    )
    assert broken_links(page, tmp_path) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#no-such-heading (no such heading)",
        "page.md: #same-heading-2 (no such heading)",
        "page.md: ../../etc/passwd (no such file)",
    ]
