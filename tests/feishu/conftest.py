"""Fixtures for the Feishu surface: a started FakeFeishu, and a surface on recording doubles."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from bot.chat.decisions import DecisionResult
from bot.config import Settings
from bot.inbox.inbox import Inbox
from bot.storage.database import Database
from bot.surfaces.feishu.send import FeishuSender, message_rate_limiter
from bot.surfaces.feishu.surface import FeishuSurface, build_sender
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.fixtures import fake_openai  # noqa: F401


def feishu_settings(fake: FakeFeishu, **overrides: Any) -> Settings:
    """Settings pointing the Feishu surface at the fake (webhook mode, token and key set)."""
    values: dict[str, Any] = {
        "feishu_app_id": fake.app_id,
        "feishu_app_secret": fake.app_secret,
        "feishu_verification_token": fake.verification_token,
        "feishu_encrypt_key": fake.encrypt_key,
        "feishu_domain": fake.url,
    }
    values.update(overrides)
    return Settings(**values)


@dataclass
class Outcome:
    kind: str


@dataclass
class RecordingRunManager:
    """Stands in for RunManager in surface-only tests: records what was dispatched."""

    messages: list[Any] = field(default_factory=list)
    surfaces: list[Any] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def register_surface(self, surface: Any) -> None:
        self.surfaces.append(surface)

    async def dispatch(self, message: Any, inbox_id: int | None = None) -> Outcome:
        async with self.changed:
            self.messages.append(message)
            self.changed.notify_all()
        return Outcome("started")

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10) -> None:  # noqa: ASYNC109
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(predicate), timeout)


@dataclass
class ScriptedBroker:
    """Stands in for ApprovalBroker: records decide() calls, answers with a scripted result."""

    result: DecisionResult = field(default_factory=lambda: DecisionResult("decided", "Approved."))
    calls: list[tuple[str, str, str, str]] = field(default_factory=list)

    async def decide(
        self,
        approval_id: str,
        user_id: str,
        decision: str,
        reason: str = "",
        *,
        platform: str,
        click: Any = None,
        **_more: Any,  # grantees, an edit's arguments and fingerprint
    ):
        assert platform == "feishu"
        self.calls.append((approval_id, user_id, decision, reason))
        return self.result


@dataclass
class SurfaceRig:
    surface: FeishuSurface
    run_manager: RecordingRunManager
    broker: ScriptedBroker
    url: str


def recording_surface(
    settings: Settings, run_manager: Any, broker: Any, db: Database, **options: Any
) -> FeishuSurface:
    """The real surface over recording doubles, with a real inbox (on `db`) in between."""
    inbox = Inbox(
        db,
        dispatch=run_manager.dispatch,
        decide=lambda r: broker.decide(
            r.approval_id, r.user_id, r.decision, r.reason, platform=r.platform
        ),
    )
    options.setdefault("sender", fast_sender(settings))
    return FeishuSurface(settings, dispatch=run_manager.dispatch, inbox=inbox, **options)


def fast_sender(settings: Settings) -> FeishuSender:
    """A sender with tiny backoff so throttling tests retry quickly."""
    return build_sender(settings, limiter=message_rate_limiter(50.0), backoff_s=0.01)


@pytest.fixture
async def rig(fake_feishu: FakeFeishu, aiohttp_server, inbox_db: Database) -> SurfaceRig:
    """The real surface (webhook route, SDK dispatcher, sender) on recording doubles."""
    settings = feishu_settings(fake_feishu)
    run_manager, broker = RecordingRunManager(), ScriptedBroker()
    surface = recording_surface(settings, run_manager, broker, inbox_db)
    app = web.Application()
    app.router.add_post("/feishu/events", surface.handle_webhook)
    app.cleanup_ctx.append(surface.lifecycle)
    server = await aiohttp_server(app)
    return SurfaceRig(surface, run_manager, broker, str(server.make_url("/feishu/events")))
