"""The `type: sql` manifest: validation errors a user can act on, a missing URL leaving the
connector out (the bot still starts), a wrong URL named without its value, and the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.cli import main
from connectors.connector_set import ConnectorSet
from connectors.loading import parse_manifest
from connectors.manifest import ManifestError
from tests.connectors.conftest import write_manifest
from tests.connectors.sql_targets import sql_manifest

REPO = Path(__file__).resolve().parents[2]


def problems(data: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data, source="shop.yaml")
    return str(info.value)


def test_parameters_must_match_the_sql() -> None:
    data = sql_manifest("postgresql")
    data["actions"][0]["sql"] = "SELECT * FROM items WHERE id = :id AND name = :name"
    assert problems(data) == (
        "shop.yaml: action 'find_item' (actions[0]): field 'parameters': the SQL's "
        "parameters ['name'] are not in parameters.properties"
    )
    data = sql_manifest("postgresql")
    data["actions"][0]["sql"] = "SELECT * FROM items"
    assert "parameters ['id'] are not used by the SQL" in problems(data)


def test_shape_errors_name_file_action_and_field() -> None:
    assert "field 'dialect'" in problems({**sql_manifest("postgresql"), "dialect": "oracle"})
    assert "field 'url_env'" in problems({**sql_manifest("sqlite"), "url_env": "not a name"})
    data = sql_manifest("sqlite")
    data["actions"][1]["method"] = "POST"
    assert "action 'rename_item' (actions[1]): field 'method': unknown field" in problems(data)
    bare = {"name": "shop", "type": "sql", "dialect": "sqlite", "url_env": "X"}
    assert "declare actions, a query action, or both" in problems(bare)
    clash = sql_manifest("sqlite", query={"name": "find_item"})
    assert "the query action's name 'find_item' is also an action's" in problems(clash)


def test_mutating_defaults_to_what_the_sql_does() -> None:
    manifest = parse_manifest(sql_manifest("postgresql"))
    read, write = manifest.actions  # type: ignore[union-attr]
    assert not read.is_mutating("postgresql") and write.is_mutating("postgresql")


async def test_a_missing_url_leaves_the_connector_out_and_a_wrong_one_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_manifest(tmp_path / "m", sql_manifest("postgresql"))
    async with aiohttp.ClientSession() as http:
        lenient = await ConnectorSet.load(tmp_path / "m", http=http, environ={})
        assert lenient.tools.names() == []
        assert lenient.skipped == [
            f"{path}: environment variable SHOP_DB_URL is not set (connector 'shop' left out)"
        ]
        secret_url = "mysql://u:hunter2-pw@db/shop"
        with pytest.raises(ManifestError) as info:
            await ConnectorSet.load(tmp_path / "m", http=http, environ={"SHOP_DB_URL": secret_url})
        assert str(info.value) == (
            f"{path}: environment variable SHOP_DB_URL names a mysql database, but the "
            "manifest says postgresql"
        )
        with pytest.raises(ManifestError) as info:
            await ConnectorSet.load(tmp_path / "m", http=http, environ={"SHOP_DB_URL": "hunter2"})
        assert "is not a SQLAlchemy URL" in str(info.value)
    assert "hunter2" not in str(info.value) + caplog.text


def test_the_cli_validates_and_lists_sql_connectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SHOP_DB_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env
    path = write_manifest(tmp_path / "m", sql_manifest("sqlite"))
    assert main(["manifests", "validate", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert f"ok: {path}: shop, SQL (sqlite), 3 action(s)" in out
    assert "note: SHOP_DB_URL is not set; the bot leaves 'shop' out until it is" in out
    assert main(["manifests", "list", str(tmp_path / "m")]) == 0
    by_tool = {line.split("\t")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert by_tool["shop__find_item"].split("\t")[1:3] == [
        "SQL read",
        "no approval (auto: read-only)",
    ]
    assert by_tool["shop__rename_item"].split("\t")[1:3] == [
        "SQL write", "approval (auto: mutating), risk high"
    ]  # fmt: skip
    assert by_tool["shop__query"].split("\t")[1] == "SQL query (read-only)"


def test_the_example_manifest_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifests", "validate", str(REPO / "manifests")]) == 0
    assert "shopdb.yaml: shopdb, SQL (postgresql), 3 action(s)" in capsys.readouterr().out


def test_a_bot_without_sql_connectors_does_not_import_the_sql_checker() -> None:
    """sqlglot costs a start-up about 0.4 s: only a bot with a SQL connector pays for it."""
    import subprocess
    import sys

    listing = "print(sorted(m for m in sys.modules if 'sqlglot' in m))"
    code = f"import sys, bot.server, bot.cli; {listing}"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
