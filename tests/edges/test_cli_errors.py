"""Every command meets a file it cannot read (a manifest, a spec or `.env` that is not UTF-8,
an impossible YAML value, an alias bomb) with one line on stderr, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from tests.server.serve_process import free_port


def _level(i: int) -> bytes:
    """One level of an alias bomb: eight references to the level before."""
    name, before = chr(98 + i), chr(97 + i)
    return f"{name}: &{name} [{', '.join([f'*{before}'] * 8)}]\n".encode()


NOT_UTF8 = b"name: caf\xe9\nbase_url: https://api.example.com\nactions: []\n"
BAD_FILES = {
    "not-utf8": NOT_UTF8,
    "impossible-date": b"name: ops\nbase_url: https://x.example.com\nsince: 2020-13-45\n",
    "alias-cycle": b"name: ops\nbase_url: https://x.example.com\nactions: &a [*a]\n",
    "alias-bomb": b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(_level(i) for i in range(9)),
}


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(params=sorted(BAD_FILES))
def bad_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    directory = tmp_path / "manifests"
    directory.mkdir()
    (directory / "ops.yaml").write_bytes(BAD_FILES[request.param])
    return directory


def test_manifests_validate_and_list_name_the_file(bad_dir: Path, capsys) -> None:
    for verb in ("validate", "list"):
        assert main(["manifests", verb, str(bad_dir)]) == 1
        line = one_line(capsys.readouterr().err)
        assert line.startswith(f"error: {bad_dir / 'ops.yaml'}: ")


def test_serve_stops_with_one_line(bad_dir: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CHATOPS_MANIFESTS_DIR", str(bad_dir))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    assert main(["serve", "--host", "127.0.0.1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("chatops: error:")]
    assert "Traceback" not in err and len(errors) == 1
    assert "bad connector manifest" in errors[0] and "ops.yaml" in errors[0]


def test_chat_stops_with_one_line(bad_dir: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["chat", "--manifests", str(bad_dir), "hello"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("chatops: error: cannot load")
    assert "ops.yaml" in err


@pytest.mark.parametrize(
    ("text", "says"),
    [(b"openapi: 3.0.0\ninfo: {title: caf\xe9}\npaths: {}\n", "not UTF-8"),
     (b"openapi: 3.0.0\ninfo: {title: x, date: 2020-13-45}\npaths: {}\n", "not JSON or YAML")],
)  # fmt: skip
def test_import_openapi_of_an_unreadable_spec(
    text: bytes, says: str, tmp_path: Path, capsys
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(text)
    assert main(["manifests", "import-openapi", str(spec), "--name", "x", "--use-spec-server"]) == 2
    assert says in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv", [["serve"], ["audit"], ["manifests", "list"], ["chat", "hello"]], ids=" ".join
)
def test_a_dotenv_that_is_not_utf8_is_one_line(argv: list[str], tmp_path: Path, capsys) -> None:
    (tmp_path / ".env").write_bytes(b"CHATOPS_MODEL=caf\xe9\n")  # the tests run in tmp_path
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert line == "chatops: error: cannot read .env: not UTF-8 text (byte 17)"


def test_a_malformed_setting_is_one_line_for_every_command(monkeypatch, capsys) -> None:
    monkeypatch.setenv("PORT", "eighty")
    for argv in (["serve"], ["audit"], ["manifests", "list"], ["chat", "hello"]):
        assert main(argv) == 2
        assert "bad configuration: PORT" in one_line(capsys.readouterr().err)
