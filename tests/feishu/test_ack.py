"""Feishu wants an answer within three seconds: slow work is acknowledged, not waited for."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.chat.threads import ThreadRef
from bot.chat.views import ApprovalCardView
from tests.fakes.feishu_api import FakeFeishu
from tests.feishu.conftest import (
    DecisionResult,
    Outcome,
    RecordingRunManager,
    feishu_settings,
    recording_surface,
)


@dataclass
class SlowRunManager(RecordingRunManager):
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def dispatch(self, message: Any, inbox_id: int | None = None) -> Outcome:
        await self.release.wait()
        return await super().dispatch(message)


@dataclass
class SlowBroker:
    release: asyncio.Event = field(default_factory=asyncio.Event)
    decided: list[str] = field(default_factory=list)

    async def decide(
        self, approval_id: str, user_id: str, decision: str, reason: str = "", **_where: str
    ):
        await self.release.wait()
        self.decided.append(approval_id)
        return DecisionResult("decided", "Approved.")


async def test_slow_dispatch_and_slow_decision_are_acknowledged_in_time(
    fake_feishu: FakeFeishu, aiohttp_server, inbox_db
):
    settings = feishu_settings(fake_feishu)
    run_manager, broker = SlowRunManager(), SlowBroker()
    surface = recording_surface(settings, run_manager, broker, inbox_db, decide_budget_s=0.5)
    app = web.Application()
    app.router.add_post("/feishu/events", surface.handle_webhook)
    app.cleanup_ctx.append(surface.lifecycle)
    url = str((await aiohttp_server(app)).make_url("/feishu/events"))

    status, body = await fake_feishu.push(url, fake_feishu.message_event("restart api"))
    assert (status, body) == (200, {"msg": "success"})
    assert run_manager.messages == []  # answered while the dispatch is still waiting

    view = ApprovalCardView(
        approval_id="ap_1",
        tool_name="t",
        connector="c",
        action="a",
        risk="low",
        requester="ou_dev",
        reason="",
        arguments="{}",
    )
    root = fake_feishu.message_event("x")["event"]["message"]["message_id"]
    ref = await surface.post_approval_card(
        ThreadRef("feishu", fake_feishu.tenant_key, "oc_group", root), view
    )
    status, body = await fake_feishu.push(
        url, fake_feishu.card_action(ref.message_id, "approve", user="ou_lead")
    )
    assert status == 200
    assert body["toast"]["type"] == "info" and "card" not in body
    assert broker.decided == []

    run_manager.release.set()
    broker.release.set()
    await run_manager.wait_for(lambda: len(run_manager.messages) == 1)
    assert run_manager.messages[0].text == "restart api"  # the dispatch went on regardless
