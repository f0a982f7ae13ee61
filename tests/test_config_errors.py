"""Every configuration error is one line on stderr and exit status 2, naming the setting.

Each setting whose type can be wrong (a number, a flag, a choice, JSON) is given a bad value in
the environment and `chatops serve` is started through `main`: it stops before anything
starts, with one line, never a traceback. The same through a real `chatops` process, and
`postgres://` URLs are accepted as PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.cli import main
from bot.config import Settings

REPO = Path(__file__).resolve().parents[1]


def bad_value(annotation: object) -> str | None:
    """A value the setting's type refuses, or None for free text."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "no-such-choice"
    if origin in (dict, list) or annotation in (dict, list):
        return "notjson"
    if args:  # Optional[X], X | None
        inner = [a for a in args if a is not type(None)]
        return bad_value(inner[0]) if len(inner) == 1 else None
    if annotation is bool:
        return "maybe"
    if annotation in (int, float):
        return "not-a-number"
    return None  # str, SecretStr: any text is a value


BAD = {
    name.upper(): value
    for name, field in Settings.model_fields.items()
    if field.annotation is not SecretStr and (value := bad_value(field.annotation)) is not None
}


def test_the_sweep_covers_the_kinds_of_setting() -> None:
    assert {"PORT", "CHATOPS_APPROVER_GROUPS", "CHATOPS_LEASE_S"} <= BAD.keys()
    assert len(BAD) >= 20


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_one_line_and_exit_2(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, BAD[name])
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("chatops: error: bad configuration: ") and name in err, err


def run_chatops(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args], cwd=cwd, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **env}, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (("serve",), {"CHATOPS_APPROVER_GROUPS": "x"}, "CHATOPS_APPROVER_GROUPS: not valid JSON"),
        (("serve",), {"PORT": "99999"}, "PORT: Input should be less than or equal to 65535"),
        (("serve", "--port", "99999"), {}, "'99999' is not a port (1-65535)"),
        (("audit", "--bogus"), {}, "unrecognized arguments: --bogus"),
        (("serve",), {"CHATOPS_AUDIT_SINK_URL": "http://127.0.0.1:9/in"},
         "CHATOPS_AUDIT_SINK_URL is set but CHATOPS_AUDIT_SINK_SECRET is not"),
    ],
    ids=["json", "port-env", "port-flag", "usage", "sink-without-secret"],
)  # fmt: skip
def test_a_real_process_says_one_line(
    args: tuple[str, ...], env: dict[str, str], said: str, tmp_path: Path
) -> None:
    done = run_chatops(*args, env=env, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_postgres_urls_as_hosting_platforms_hand_them_out(scheme: str) -> None:
    url = f"{scheme}://u:pw@db.example:5432/chatops"
    settings = Settings(database_url=url)
    assert settings.database_url == "postgresql+psycopg://u:pw@db.example:5432/chatops"
    assert Settings(database_url="sqlite:///x.db").database_url == "sqlite:///x.db"


def one_line_exit_2(done: subprocess.CompletedProcess[str]) -> str:
    """The one non-empty line on stderr of a command that stopped with exit status 2."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and done.stdout == "", done
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


PASSWORD = "pw-5e6f7a8b"
BAD_URLS = {
    "unknown-scheme": ("foo://db.example/chatops", "unknown database scheme 'foo'"),
    "no-driver": (f"mysql://u:{PASSWORD}@db.example/chatops", "the driver for 'mysql' is not"),
    "not-a-url": ("chatops.db", "is not a database URL"),
    "refused": (
        f"postgresql://u:{PASSWORD}@127.0.0.1:1/chatops",
        "cannot reach the database DATABASE_URL=postgresql+psycopg://u:***@127.0.0.1:1/chatops"
        ": connection failed",
    ),
}


@pytest.mark.parametrize("command", ["serve", "audit"])
@pytest.mark.parametrize("case", sorted(BAD_URLS))
def test_a_bad_database_url_is_one_line_naming_it(command: str, case: str, tmp_path: Path) -> None:
    url, said = BAD_URLS[case]
    done = run_chatops(command, env={"DATABASE_URL": url}, cwd=tmp_path)
    line = one_line_exit_2(done)
    assert "DATABASE_URL" in line and said in line, line
    assert PASSWORD not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created on the way


def test_serve_cannot_put_sqlite_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    url = f"sqlite:///{tmp_path}/afile/sub/chatops.db"
    line = one_line_exit_2(run_chatops("serve", env={"DATABASE_URL": url}, cwd=tmp_path))
    assert line == (
        f"chatops: error: DATABASE_URL={url}: cannot create the directory {tmp_path}/afile/sub"
        f": {tmp_path}/afile is a file, not a directory"
    )


def test_chat_says_the_same_of_a_bad_database_url(tmp_path: Path) -> None:
    env = {"DATABASE_URL": BAD_URLS["refused"][0], "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    done = run_chatops("chat", "hello", env=env, cwd=tmp_path)  # no manifests directory here
    line = one_line_exit_2(done)  # the database's error alone: no "[*] no ... directory" before
    assert line.startswith("chatops: error: cannot reach the database "), line
    assert PASSWORD not in done.stderr


def test_audit_in_an_empty_directory_creates_no_database(tmp_path: Path) -> None:
    line = one_line_exit_2(run_chatops("audit", env={}, cwd=tmp_path))
    assert line.startswith("chatops: error: no database at DATABASE_URL=sqlite:///./chatops.db (")
    assert list(tmp_path.iterdir()) == []  # no chatops.db, no lock, no directory


def test_audit_under_a_missing_directory_creates_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/not/yet/chatops.db"
    one_line_exit_2(run_chatops("audit", env={"DATABASE_URL": url}, cwd=tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.empty_database
@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_audit_on_a_database_never_migrated_says_so(database_url: str, tmp_path: Path) -> None:
    if database_url.startswith("sqlite:///"):
        Path(database_url.removeprefix("sqlite:///")).touch()  # an empty file: no schema
    line = one_line_exit_2(run_chatops("audit", env={"DATABASE_URL": database_url}, cwd=tmp_path))
    assert "has no chatops schema (never migrated)" in line and "DATABASE_URL=" in line


def test_serve_creates_sqlite_directories_and_audit_then_reads_them(tmp_path: Path) -> None:
    """The directories serve would create are made by `chat` too (same preparation); audit
    reads what they made. Here through the preparation itself, without a model."""
    from bot.storage.database import open_database
    from bot.storage.opening import open_existing, prepare_database

    url = f"sqlite:///{tmp_path}/a/b/chatops.db"
    prepare_database(url)
    assert (tmp_path / "a" / "b").is_dir()
    open_database(url).dispose()
    open_existing(url, needs_table="call_log").dispose()
