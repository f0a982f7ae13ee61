"""End-to-end harness: the real app (`bot.server.create_app`) with Slack pointed at FakeSlack,
the model at FakeOpenAI and the connector at a fake ops API; requests are signed for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.config import Settings
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY
from tests.fakes.ops_api import ANSWER, OpsAPI, ops_manifest, restart_then_answer
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.slack.payloads import (
    CHANNEL,
    SIGNING_SECRET,
    as_body,
    block_actions,
    mention,
    signed_headers,
    view_submission,
)

__all__ = ["ANSWER", "OpsAPI", "restart_then_answer", "manifest"]

MANIFEST_APPROVERS = ("U0LEAD",)


def manifest(url: str) -> str:
    """The ops manifest with this platform's approver."""
    return ops_manifest(url, approvers=MANIFEST_APPROVERS)


def bot_settings(
    *, database_url: str, manifests: Path, slack: FakeSlack, llm_url: str, **extra: Any
) -> Settings:
    return Settings(
        _env_file=None,
        database_url=database_url,
        chatops_manifests_dir=manifests,
        openai_base_url=llm_url,
        openai_api_key="sk-test-not-a-secret",
        chatops_model="fake-model",
        chatops_llm_max_retries=0,
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.url,
        **extra,
    )


def ops_settings(
    tmp_path: Path, *, database_url: str, ops_api: OpsAPI, slack: FakeSlack, llm_url: str
) -> Settings:
    """`bot_settings` with the ops manifest (pointed at `ops_api`) as the only connector."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    return bot_settings(
        database_url=database_url, manifests=manifests, slack=slack, llm_url=llm_url
    )


class SlackBot:
    """Talks to the running app the way Slack does: signed events, clicks and submissions."""

    def __init__(self, client: TestClient, fake: FakeSlack) -> None:
        self.client = client
        self.fake = fake

    @property
    def app(self) -> web.Application:
        assert self.client.app is not None
        return self.client.app

    def lift_edit_budget(self) -> None:
        """Tests with many runs at once: Slack's chat.update budget (40 a minute) would make
        them wait minutes for their status edits; raise it far above what they need."""
        limiter = self.app[SLACK_INBOUND_KEY].surface.limiter
        limiter.rate, limiter.burst = 1000.0, 1000.0

    async def send(self, payload: dict[str, Any] | str, **sign: Any) -> int:
        body = as_body(payload)
        response = await self.client.post(
            "/slack/events", data=body, headers=signed_headers(body, **sign)
        )
        await self.app[SLACK_INBOUND_KEY].wait_idle(10)
        return response.status

    async def click(self, card: dict[str, Any], action_id: str, *, user: str) -> int:
        return await self.send(block_actions(card, action_id, user=user))

    async def submit_reject(self, view: dict[str, Any], *, user: str, reason: str | None) -> int:
        return await self.send(view_submission(view, user=user, reason=reason))

    async def wait_idle(self, timeout: float = 15) -> None:  # noqa: ASYNC109 - a bound
        from bot.server import RUNTIME_KEY

        await self.app[RUNTIME_KEY].run_manager.wait_idle(timeout)  # type: ignore[attr-defined]

    async def request_restart(self, *, pending: bool = True) -> tuple[str, dict[str, Any]]:
        """U0DEV asks for a restart; returns the thread root and its approval card once it is
        pending (or, with `pending=False`, once it has ended)."""
        event = mention("restart api", user="U0DEV")
        root = event["event"]["ts"]
        await self.send(event)
        return root, await wait_card(self.fake, root, pending=pending)


def has_buttons(message: dict[str, Any]) -> bool:
    return any(b.get("type") == "actions" for b in message.get("blocks", []))


def card_in(fake: FakeSlack, root: str, *, pending: bool | None = None) -> dict[str, Any] | None:
    """The approval card posted in the thread (by its header), optionally only if (not) pending."""
    for message in fake.thread_messages(CHANNEL, root):
        blocks = message.get("blocks", [])
        is_card = bool(blocks) and blocks[0].get("type") == "header"
        if is_card and (pending is None or has_buttons(message) == pending):
            return message
    return None


async def wait_card(fake: FakeSlack, root: str, *, pending: bool) -> dict[str, Any]:
    return await fake.wait_for(lambda: card_in(fake, root, pending=pending), 15)


def texts(fake: FakeSlack, root: str) -> list[str]:
    return [m["text"] for m in fake.thread_messages(CHANNEL, root)]


async def ops_bot(
    aiohttp_client: Any,
    database_url: str,
    directory: Path,
    ops_url: str,
    fake: FakeSlack,
    llm_url: str,
    *,
    approvers: tuple[str, ...] = (),
    **extra: Any,
) -> SlackBot:
    """The real app on the ops manifest (`approvers`: none = anyone in the thread), with
    `extra` settings."""
    from bot.server import create_app
    from tests.fakes.ops_api import ops_manifest

    manifests = directory / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "ops.yaml").write_text(ops_manifest(ops_url, approvers=approvers))
    settings = bot_settings(database_url=database_url, manifests=manifests, slack=fake,
                            llm_url=llm_url, **extra)  # fmt: skip
    return SlackBot(await aiohttp_client(create_app(settings)), fake)
