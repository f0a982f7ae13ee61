"""The chat command functions (parse, permission, reply) and the `audit__report` tool, the
latter through the real engine: the model (FakeOpenAI, real openai SDK) calls the tool and
reads the Markdown report, and the viewer hook keeps the report from non-viewers."""

from __future__ import annotations

import pytest

from bot.approvals.schema import policy_of
from bot.audit.command import (
    NOT_ALLOWED,
    AuditChatReply,
    AuditCommandError,
    Place,
    can_view,
    handle_audit_command,
    parse_audit_command,
)
from bot.audit.tool import AUDIT_TOOL_NAME, AuditViewerHook, audit_report_tool
from bot.config import Settings
from bot.engine.agent import ReActAgent
from bot.engine.hooks import HookRegistry, RunContext
from bot.engine.tools import Audience, ToolRegistry
from bot.storage.database import Database
from tests.audit.conftest import NOW
from tests.fakes.fixtures import fake_openai, make_llm  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call

VIEWERS = Settings(chatops_audit_viewers="U_LEAD, U_SEC")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("audit", ("2026-11-13", None, None)),
        ("audit 24h", ("2026-11-19", None, None)),
        ("<@U0BOT> audit 2w k8s", ("2026-11-06", "k8s", None)),
        ("@_user_1 AUDIT 7d k8s restart", ("2026-11-13", "k8s", "restart")),
        ("audit k8s__restart", ("2026-11-13", "k8s", "restart")),
        ("7d pagerduty", ("2026-11-13", "pagerduty", None)),  # slash command text
        ("30m", ("2026-11-20", None, None)),
    ],
)
def test_parse_audit_command(text: str, expected: tuple[str, str | None, str | None]) -> None:
    query = parse_audit_command(text, now=NOW)
    assert query is not None
    assert (f"{query.since:%Y-%m-%d}", query.connector, query.action) == expected
    assert query.until == NOW


@pytest.mark.parametrize("text", ["", "   ", "restart the api please", "<@U0BOT> status?"])
def test_not_an_audit_command(text: str) -> None:
    assert parse_audit_command(text, now=NOW) is None


@pytest.mark.parametrize(
    "text",
    ["audit 7d a b c", "audit the logs for me now", "audit 7d k8s;", "audit 10000000w"],
)
def test_bad_audit_command(text: str) -> None:
    with pytest.raises(AuditCommandError, match="Usage: `audit"):
        parse_audit_command(text, now=NOW)


HERE = Place("slack", "C0OPS")  # a channel (private replies: nothing scoped)


async def audit(db: Database, user: str, text: str) -> AuditChatReply | None:
    return await handle_audit_command(db, VIEWERS, user, text, place=HERE, now=NOW)


def test_can_view() -> None:
    assert can_view(VIEWERS, "U_LEAD") and can_view(VIEWERS, "U_SEC")
    assert not can_view(VIEWERS, "U_ALICE")
    assert not can_view(VIEWERS, "")
    assert not can_view(Settings(), "U_LEAD")  # nobody when unset


async def test_chat_reply_for_a_viewer(audit_db: Database) -> None:
    reply = await audit(audit_db, "U_LEAD", "audit 7d k8s")
    assert reply is not None and reply.kind == "report" and reply.report is not None
    assert reply.report.totals.calls == 6
    assert reply.report.approvals.requested == 4


async def test_chat_reply_for_anyone_else_is_private_and_empty(audit_db: Database) -> None:
    for text in ("audit 7d", "audit 7d a b c"):
        reply = await audit(audit_db, "U_ALICE", text)
        assert reply is not None
        assert (reply.kind, reply.report, reply.message) == ("not_allowed", None, NOT_ALLOWED)


async def test_chat_reply_usage_and_not_a_command(audit_db: Database) -> None:
    usage = await audit(audit_db, "U_LEAD", "audit 7x")
    assert usage is not None and usage.kind == "usage" and "Usage:" in usage.message
    assert await audit(audit_db, "U_LEAD", "hello") is None


async def test_tool_invoke(audit_db: Database) -> None:
    tool = audit_report_tool(audit_db, VIEWERS)
    assert tool.name == AUDIT_TOOL_NAME and not policy_of(tool).requires_approval
    assert set(tool.parameters["properties"]) == {"since", "until", "connector", "action", "user"}
    assert tool.invoke_for is not None
    private = Audience(platform="slack", channel="D0LEAD", direct=True, requesters=("U_LEAD",))
    result = await tool.invoke_for(
        private,
        {"since": "2026-11-13T12:00Z", "until": "2026-11-20T12:00Z", "connector": "pagerduty"},
    )
    assert not result.is_error
    assert "| 5 | 3 | 1 | 0 | 1 | 0 | 2 | 2 |" in result.content  # pagerduty totals row
    assert "| U_BOB | pagerduty | acknowledge |" in result.content
    bad = await tool.invoke_for(private, {"since": "7x"})
    assert bad.is_error and "bad time '7x'" in bad.content
    assert (await tool.invoke({})).is_error  # never without knowing who asks, and where


def agent_with_audit(db: Database, fake: FakeOpenAI) -> ReActAgent:
    hooks = HookRegistry()
    hooks.add_pre(AuditViewerHook(VIEWERS), name="audit_viewers", tools=AUDIT_TOOL_NAME)
    tools = ToolRegistry([audit_report_tool(db, VIEWERS)])
    return ReActAgent(make_llm(fake), tools, hooks=hooks, completion_check=False)


def tool_observation(fake: FakeOpenAI) -> str:
    messages = fake.requests[1]["messages"]
    return next(m["content"] for m in messages if m["role"] == "tool")


async def test_agent_reads_the_report(audit_db: Database, fake_openai: FakeOpenAI) -> None:  # noqa: F811
    fake_openai.script(
        tool_call(
            AUDIT_TOOL_NAME,
            {"since": "2026-11-13T12:00Z", "until": "2026-11-20T12:00Z", "action": "restart"},
        ),
        answer("U_LEAD, U_DAVE and U_CAROL approved restarts."),
    )
    agent = agent_with_audit(audit_db, fake_openai)
    in_a_dm = RunContext(requester="U_SEC", platform="slack", channel="D0SEC", direct=True)
    result = await agent.run("who approved restarts last week?", context=in_a_dm)
    assert result.answer == "U_LEAD, U_DAVE and U_CAROL approved restarts."
    observation = tool_observation(fake_openai)
    assert "approved by U_CAROL" in observation and "approved by U_DAVE" in observation
    assert "## Mutating calls (5)" in observation
    fake_openai.assert_complete()


async def test_agent_cannot_read_it_for_a_non_viewer(
    audit_db: Database,
    fake_openai: FakeOpenAI,  # noqa: F811
) -> None:
    fake_openai.script(
        tool_call(AUDIT_TOOL_NAME, {"since": "7d"}),
        answer("You are not allowed to see audit reports."),
    )
    agent = agent_with_audit(audit_db, fake_openai)
    await agent.run("who approved restarts?", context=RunContext(requester="U_ALICE"))
    observation = tool_observation(fake_openai)
    assert "not allowed to see audit reports" in observation
    assert "U_LEAD" not in observation and "Mutating calls" not in observation
