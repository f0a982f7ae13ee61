"""A SQL connector in the real app, driven through the web console: the model reads with a
declared query, tries a write through `query` (refused, nobody asked), then asks for a declared
write, which waits for a human's approval before the database changes. The bot's own database is
SQLite or PostgreSQL; the connector's target is PostgreSQL or SQLite. The URL and its password
reach no model request, console item or call-log row."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlmodel import Session, create_engine, select

from bot.server import create_app
from bot.storage.models import CallLog
from tests.connectors.conftest import write_manifest
from tests.connectors.sql_targets import Target, seeded, sql_manifest
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.server.conftest import ConsoleClient, llm_settings, make_settings  # noqa: F401

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("shop__find_item", {"id": 2}),
    ("shop__query", {"sql": "DELETE FROM items"}),
    ("shop__rename_item", {"id": 2, "name": "bravo"}),
]


@pytest.fixture(params=["postgresql", "sqlite"])
def chat_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    yield from seeded(request.param, tmp_path)


def scripted(body: dict[str, Any]) -> Turn:
    """The model: the calls above, one per turn, then an answer; the synthesis streams."""
    if body.get("stream"):
        return answer("Item 2 is now called bravo.")
    made = sum(1 for m in body["messages"] if m["role"] == "tool")
    if made < len(CALLS):
        return tool_call(*CALLS[made], id=f"call_{made}")
    return answer("Renamed.")


def name_of(target: Target, item_id: int) -> str:
    return str(target.scalar(f"SELECT name FROM items WHERE id = {item_id}"))


@pytest.mark.both_databases
async def test_a_declared_write_waits_for_approval_in_the_console(
    database_url: str, chat_target: Target, tmp_path: Path, aiohttp_client: Any,
    make_settings: Any, fake_openai: FakeOpenAI,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    target = chat_target
    write_manifest(tmp_path / "manifests", sql_manifest(target.dialect))
    monkeypatch.setenv("SHOP_DB_URL", target.url)
    fake_openai.respond_with(scripted)
    settings = make_settings(database_url=database_url,
                             chatops_manifests_dir=tmp_path / "manifests",
                             **llm_settings(fake_openai))  # fmt: skip
    client: TestClient = await aiohttp_client(create_app(settings))
    console = ConsoleClient(client)
    await console.start()
    try:
        sent = await (await console.send("rename item 2 to bravo", user="alice")).json()
        card = await console.wait_item(
            lambda i: i["kind"] == "approval" and i["data"]["state"] == "pending"
        )
        assert card["data"]["tool_name"] == "shop__rename_item"
        assert card["data"]["risk"] == "high"
        assert json.loads(card["data"]["arguments"]) == {"id": 2, "name": "bravo"}
        assert name_of(target, 2) == "beta"  # nothing written before a human says so

        decided = await console.decide(card["data"]["approval_id"], "approve", user="bob")
        assert decided.status == 200
        await console.wait_item(lambda i: i["kind"] == "answer" and i["thread"] == sent["thread"])
        assert name_of(target, 2) == "bravo"
        assert name_of(target, 1) == "alpha"  # the refused DELETE changed nothing
        shown = json.dumps(console.items) + json.dumps(console.frames)
    finally:
        await console.close()

    with Session(create_engine(database_url)) as session:
        rows = session.exec(select(CallLog).order_by(CallLog.id)).all()  # type: ignore[arg-type]
    by_action = {row.action: row for row in rows}
    assert [row.action for row in rows] == ["find_item", "query", "rename_item"]
    assert by_action["find_item"].result_status == "ok"
    assert by_action["find_item"].approval_status == "not_required"
    assert "2 | beta | green" in (by_action["find_item"].observation or "")
    assert by_action["query"].result_status == "error"
    assert (by_action["query"].observation or "").startswith("Refused: only SELECT")
    assert by_action["rename_item"].approval_status == "approved"
    assert by_action["rename_item"].result_status == "ok"
    assert "bob" in json.dumps(by_action["rename_item"].approvers)

    seen_by_model = json.dumps(fake_openai.requests)
    assert "2 | beta | green" in seen_by_model
    logged = json.dumps([row.model_dump(mode="json") for row in rows])
    for text in (seen_by_model, shown, logged, caplog.text):
        for secret in target.secrets:
            assert secret not in text
