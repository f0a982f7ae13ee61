"""Every command and setting the docs name exists (issue 28 item 9).

The walker reads README.md and docs/*.md: in each shell-like fenced block (sh, bash, shell,
console, untagged) a `chatops ...` command must parse with the real argparse of `bot.cli` (a
usage synopsis with `[...]`, `(a | b)` or metavars: its sub-commands and options must exist),
and a `make ...` command must name Makefile targets; inline code spans that start with
`chatops ` are checked like a synopsis. Anywhere in the text, a `CHATOPS_*`, `SLACK_*`,
`FEISHU_*`, `OPENAI_*`, `OTEL_*` or `DATABASE_URL` variable must be a setting of `Settings`, or
one of the few names below that something else reads. Nothing is executed: argparse only parses.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.cli import build_parser
from bot.config import Settings
from bot.storage.migrate import head_revision

ROOT = Path(__file__).resolve().parents[2]
SHELL_BLOCKS = {"sh", "bash", "shell", "console", ""}
VARIABLE = re.compile(r"(?<![\w$])((?:CHATOPS|SLACK|FEISHU|OPENAI|OTEL)_[A-Z0-9_]*|DATABASE_URL)\b")
# names the docs may give that are not settings of the bot; each says who reads it
NOT_SETTINGS = {
    "CHATOPS_TEST_POSTGRES_URL": "tests/databases.py: the PostgreSQL the test suite uses",
    "CHATOPS_TEST_CHROMIUM": "tests/browser/conftest.py: the browser of the console's test",
}
# inline code that starts with `chatops ` but is no command, and where it comes from
NOT_COMMANDS = {"chatops serving on": "bot/server.py: the first line `chatops serve` logs"}
OUTPUT = re.compile(r"^chatops( [a-z-]+)?: ")  # a line it prints: `chatops audit: 3 rows`
SYNOPSIS = re.compile(r"\s\[|\]|\(--|\s\|\s")
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")"}


@dataclass(frozen=True)
class Command:
    """One command found in a document: where, the words, and whether it is a usage synopsis."""

    where: str
    words: list[str]
    synopsis: bool


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _blocks(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(first line number, info string, lines) of every fenced block."""
    info: str | None = None
    start, lines = 0, []
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*```(.*)$", line)
        if fence and info is None:
            info, start, lines = fence.group(1).strip().lower(), number + 1, []
        elif fence:
            yield start, info, lines
            info = None
        elif info is not None:
            lines.append(line)


def _logical_lines(lines: list[str], console: bool) -> Iterator[tuple[int, str]]:
    """Lines with their `\\` continuations joined; in a console block only `$ ` prompts."""
    pending, first = "", 0
    for offset, line in enumerate(lines):
        if not pending:
            if console:
                if not line.lstrip().startswith("$ "):
                    continue
                line = line.lstrip()[2:]
            first = offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield first, pending + line
        pending = ""
    if pending:
        yield first, pending


def _simple_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line, split at `&&`, `;`, pipes; comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: not shell, e.g. prose in an untagged block
        return []
    commands, current = [], []
    for token in tokens:
        if token in SEPARATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    return [c for c in [*commands, current] if c]


def _strip_assignments(words: list[str]) -> list[str]:
    """`X=1 Y=2 chatops serve` -> `chatops serve`; `export X=1` is no command of ours."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    return words


def commands_in(path: Path) -> list[Command]:
    """The `chatops` and `make` commands of one document."""
    found: list[Command] = []
    text = path.read_text()
    for start, info, lines in _blocks(text):
        if info not in SHELL_BLOCKS:
            continue
        for offset, line in _logical_lines(lines, console=info == "console"):
            where = f"{path.name}:{start + offset}"
            synopsis = bool(SYNOPSIS.search(re.sub(r"#.*$", "", line)))
            if synopsis:
                flat = re.sub(r"[\[\]()|]", " ", re.sub(r"\s#.*$", "", line))
                candidates = [flat.split()]
            else:
                candidates = _simple_commands(line)
            for words in candidates:
                words = _strip_assignments(words)
                if words and (words[0] in ("chatops", "make") or words[0].endswith("/chatops")):
                    found.append(Command(where, ["chatops", *words[1:]] if words[0] != "make"
                                         else words, synopsis))  # fmt: skip
    for number, line in enumerate(text.splitlines(), 1):
        for span in re.findall(r"`(chatops [^`]+)`", line):
            if any(span.startswith(phrase) for phrase in NOT_COMMANDS) or OUTPUT.match(span):
                continue
            found.append(Command(f"{path.name}:{number}", span.split(), synopsis=True))
    return found


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its sub-commands here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}  # noqa: SLF001


def check_chatops(command: Command) -> str | None:
    """None when the command parses (or, a synopsis, names only what exists); else why not."""
    args = command.words[1:]
    if not command.synopsis:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                build_parser().parse_args(args)
            except SystemExit as exit_:
                if exit_.code != 0:
                    return err.getvalue().strip().splitlines()[-1]
        return None
    parser, path = build_parser(), ["chatops"]
    options = _options(parser)
    for word in args:
        choices = _subparsers(parser)
        if choices and not word.startswith("-"):
            if word not in choices:
                return f"{' '.join(path)} has no sub-command {word!r}"
            parser, path = choices[word], [*path, word]
            options |= _options(parser)
        elif word.startswith("--") and word.split("=", 1)[0] not in options:
            return f"{' '.join(path)} has no option {word.split('=', 1)[0]}"
    return None  # `chatops manifests` alone names the group: fine in prose


def make_targets(root: Path = ROOT) -> set[str]:
    text = (root / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*)\s*:(?!=)", text, flags=re.MULTILINE))


def check_make(command: Command, targets: set[str]) -> str | None:
    named = [w for w in command.words[1:] if not w.startswith("-") and "=" not in w]
    unknown = [w for w in named if w not in targets]
    return f"the Makefile has no target {unknown[0]!r}" if unknown else None


def variables_in(path: Path) -> list[tuple[str, str]]:
    """(where, name) for every variable of ours the document names; a bare prefix such as
    `SLACK_*` or `OTEL_EXPORTER_OTLP_*` stands for a family and is checked as a prefix."""
    return [
        (f"{path.name}:{number}", name)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for name in VARIABLE.findall(line)
    ]


def check_variable(name: str) -> str | None:
    settings = {field.upper() for field in Settings.model_fields}
    if name in settings or name in NOT_SETTINGS:
        return None
    if name.endswith("_") and any(s.startswith(name) for s in settings):
        return None  # a family (`SLACK_*`) that has settings
    return f"{name} is not a setting"


def problems(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Every command or variable of `paths` that does not exist, as `file:line: why`."""
    found, targets = [], make_targets(root)
    for path in paths:
        for command in commands_in(path):
            if command.words[0] == "make":
                why = check_make(command, targets)
            else:
                why = check_chatops(command)
            if why:
                found.append(f"{command.where}: {' '.join(command.words)}: {why}")
        for where, name in variables_in(path):
            if why := check_variable(name):
                found.append(f"{where}: {why}")
    return found


def test_every_command_and_setting_in_the_docs_exists() -> None:
    paths = documents()
    assert len(paths) >= 11
    commands = [c for p in paths for c in commands_in(p)]
    # the walker sees the commands it should (guards against a walker that finds nothing)
    assert sum(not c.synopsis and c.words[0] == "chatops" for c in commands) >= 8
    assert any(c.words[:2] == ["make", "run"] for c in commands)
    assert not problems(paths), "\n".join(problems(paths))


def test_every_schema_revision_the_docs_show_exists_and_the_start_up_log_shows_the_newest() -> None:
    revisions = {p.stem for p in (ROOT / "bot/storage/migrations/versions").glob("0*.py")}
    shown = [
        (path.name, name)
        for path in documents()
        for name in re.findall(r"schema revision (\d{4}_\w+)", path.read_text())
    ]
    assert shown and not [s for s in shown if s[1] not in revisions], shown
    start_up = re.search(
        r"ready \(schema revision (\w+)\)", (ROOT / "docs/operations.md").read_text()
    )
    assert start_up and start_up.group(1) == head_revision()


def test_the_exceptions_come_from_where_they_say() -> None:
    for name, reader in NOT_SETTINGS.items():
        assert name in (ROOT / reader.split(":")[0]).read_text(), (name, reader)
    for phrase, source in NOT_COMMANDS.items():
        assert f'"{phrase} ' in (ROOT / source.split(":")[0]).read_text(), (phrase, source)


def test_the_walker_catches_made_up_commands_options_targets_and_settings(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("run: x\n\tchatops serve\ntest:\n\tpytest\nX := 1\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "README.md").write_text(
        "# Fine\n\n```sh\nmake run\nchatops serve --port 8080\n```\n"
    )
    page = docs / "page.md"
    page.write_text(
        "# Page\n\n"
        "Set `CHATOPS_MODEL` and `SLACK_*`, not `CHATOPS_MADE_UP` nor `FEISHU_NOPE_`.\n\n"
        "```sh\n"
        "export OPENAI_API_KEY=sk-1   # fine\n"
        "chatops deploy --now                       # no such command\n"
        "CHATOPS_LOG_LEVEL=DEBUG chatops serve --tls   # no such option\n"
        "chatops audit --since 7d --format xml && make deploy\n"
        "chatops manifests validate manifests | head\n"
        "chatops manifests import-openapi spec.yaml \\\n"
        "  --name billing --base-url https://x --colour\n"
        "make X\n"
        "```\n\n"
        "```console\n$ chatops serve --port 0\n"
        "chatops serve --bogus is output, not a command\n```\n\n"
        "```text\nchatops serve --bogus in a text block is not checked\n```\n\n"
        "```\nchatops manifests explain FILE ACTION [--user U] [--colour C]\n"
        "chatops manifests frobnicate [DIR]\n```\n\n"
        "Run `chatops audit --colour 5` or `chatops serve --host H`; it says "
        "`chatops audit: 3 rows written`.\n"
    )
    found = problems(documents(tmp_path), root=tmp_path)
    expected = [  # where and what, then a piece of the reason (argparse words it by version)
        ("page.md:7: chatops deploy --now:", "invalid choice: 'deploy'"),
        ("page.md:8: chatops serve --tls:", "unrecognized arguments: --tls"),
        ("page.md:9: chatops audit --since 7d --format xml:", "invalid choice: 'xml'"),
        ("page.md:9: make deploy:", "no target 'deploy'"),
        ("page.md:11: chatops manifests import-openapi spec.yaml --name billing --base-url "
         "https://x --colour:", "unrecognized arguments: --colour"),
        ("page.md:13: make X:", "no target 'X'"),
        ("page.md:17: chatops serve --port 0:", "'0' is not a port (1-65535)"),
        ("page.md:26: chatops manifests explain FILE ACTION --user U --colour C:",
         "chatops manifests explain has no option --colour"),
        ("page.md:27: chatops manifests frobnicate DIR:",
         "chatops manifests has no sub-command 'frobnicate'"),
        ("page.md:30: chatops audit --colour 5:", "chatops audit has no option --colour"),
        ("page.md:3:", "CHATOPS_MADE_UP is not a setting"),
        ("page.md:3:", "FEISHU_NOPE_ is not a setting"),
    ]  # fmt: skip
    assert len(found) == len(expected), "\n".join(found)
    for problem, (head, reason) in zip(found, expected, strict=True):
        assert problem.startswith(head) and reason in problem, (problem, head, reason)
