"""Feishu answers bursts of 5xx and 429 (with Retry-After) to the bot's replies and edits,
under a real serve process (webhook mode): each mention still gets one outcome, and each
approved restart runs once."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.faults.cluster import model
from tests.faults.invariants import Conversation, counted, settle
from tests.feishu.e2e import DEV, LEAD, approval_message, has_form, manifest, wait_card
from tests.server.serve_process import feishu_serve_env, serving


class FeishuThreads:
    """The invariants' view of FakeFeishu."""

    def __init__(self, fake: FakeFeishu) -> None:
        self.fake = fake

    def texts(self, thread: str) -> list[str]:
        return [json.dumps(m.content, ensure_ascii=False) for m in self.fake.replies_to(thread)]

    def live_card(self, thread: str) -> bool:
        card = approval_message(self.fake, thread)
        return card is not None and has_form(card.content)


async def test_feishu_5xx_and_429_bursts(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    fake_openai.respond_with(model)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    env = feishu_serve_env(database_url=database_url, manifests=manifests, fake=fake_feishu,
                           llm_url=fake_openai.base_url)  # fmt: skip
    for op in ("message.reply", "message.patch"):
        fake_feishu.fail_next(op, status=503, code=1500, msg="internal error", count=3)
        fake_feishu.fail_next(op, status=429, headers={"Retry-After": "1"}, count=3)
    conversations = []
    async with serving(tmp_path, env) as bot:
        url = f"{bot.url}/feishu/events"
        for service in ("svc-1", "svc-2"):
            event = fake_feishu.message_event(f"restart {service} please", user=DEV)
            assert (await fake_feishu.push(url, event))[0] == 200
            conversations.append(Conversation(service, event["event"]["message"]["message_id"]))
        for conv in conversations:
            card = await wait_card(fake_feishu, conv.thread, pending=True)
            click = fake_feishu.card_action(card.message_id, "approve", user=LEAD)
            assert (await fake_feishu.push(url, click))[0] == 200
        verdict = await settle(
            database_url, conversations, FeishuThreads(fake_feishu),
            lambda: counted(ops_api.restarts), within=60,
        )  # fmt: skip
    verdict.raise_if_broken()
    assert verdict.pending == 0 and counted(ops_api.restarts) == {"svc-1": 1, "svc-2": 1}
    assert len([c for c in fake_feishu.requests if c.status in (429, 503)]) == 12
