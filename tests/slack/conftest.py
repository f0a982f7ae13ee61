"""Fixtures for the Slack tests: the fake Slack Web API, settings pointing at it, and a bolt
app mounted on a bare aiohttp application for the surface-level tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.approvals.applier import decision_applier
from bot.chat.controls import stop_result
from bot.chat.ports import SurfacePorts
from bot.chat.surface import Surface
from bot.chat.threads import InboundMessage
from bot.chat.views import BotStatus
from bot.config import Settings
from bot.inbox.inbox import Inbox
from bot.storage.database import Database
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY, setup_slack
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.security.conftest import db_rows  # noqa: F401
from tests.slack.payloads import SIGNING_SECRET


@dataclass
class Outcome:
    kind: str


@dataclass
class Decided:
    status: str
    message: str = ""
    view: Any = None


@dataclass
class RecordingRunManager:
    """Stands in for RunManager in surface-level tests: records what the surface dispatches."""

    surfaces: dict[str, Surface] = field(default_factory=dict)
    dispatched: list[InboundMessage] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    gate: asyncio.Event | None = None  # when set, each dispatch waits for it before finishing
    dispatching: asyncio.Event = field(default_factory=asyncio.Event)  # a dispatch has begun
    stops: list[Any] = field(default_factory=list)  # what the surface asked the `stop` port

    def register_surface(self, surface: Surface) -> None:
        self.surfaces[surface.platform] = surface

    async def dispatch(self, message: InboundMessage) -> Outcome:
        self.started.append(message.event_id)
        self.dispatching.set()
        if self.gate is not None:
            await self.gate.wait()
        self.dispatched.append(message)
        return Outcome("started")


@dataclass
class RecordingBroker:
    """Stands in for ApprovalBroker: records decisions and answers with a scripted status."""

    status: str = "decided"
    message: str = ""
    decisions: list[tuple[str, str, str, str]] = field(default_factory=list)

    view_of: Any = None  # what `view()` returns (the grant dialog shows it)
    grantees: list[list[str] | None] = field(default_factory=list)

    async def decide(
        self,
        approval_id: str,
        user_id: str,
        decision: str,
        reason: str = "",
        *,
        platform: str,
        grantees: list[str] | None = None,
        click: Any = None,
        arguments: dict | None = None,
        fingerprint: str = "",
    ):
        assert platform == "slack"
        self.decisions.append((approval_id, user_id, decision, reason))
        self.grantees.append(grantees)
        return Decided(self.status, self.message)

    async def refusal(
        self, approval_id: str, user_id: str, decision: str, *, platform: str, click: Any = None
    ):
        """Like the broker: a refusal when the scripted status is not a decision."""
        assert platform == "slack"
        if self.status in ("decided", "recorded"):
            return None
        return Decided(self.status, self.message)

    async def view(self, approval_id: str):
        return self.view_of


@dataclass
class SurfaceRuntime:
    """What `setup_slack` needs of the runtime: recording doubles behind a real inbox."""

    settings: Settings
    db: Database
    run_manager: RecordingRunManager = field(default_factory=RecordingRunManager)
    broker: RecordingBroker = field(default_factory=RecordingBroker)
    inbox: Inbox = field(init=False)

    def __post_init__(self) -> None:
        run_manager, broker = self.run_manager, self.broker

        async def dispatch(message: InboundMessage, inbox_id: int) -> Outcome:
            return await run_manager.dispatch(message)

        self.inbox = Inbox(
            self.db,
            dispatch=dispatch,
            decide=decision_applier(broker, lambda: run_manager.surfaces),  # type: ignore[arg-type]
        )

    def ports(self) -> SurfacePorts:
        """The surface's ports over the doubles (audit commands get no answer: usage)."""
        run_manager = self.run_manager

        async def dispatch(message: InboundMessage, inbox_id: int | None) -> Any:
            return await run_manager.dispatch(message)

        async def no_audit(user_id: str, text: str, place: Any) -> None:
            return None

        async def stop(request: Any) -> Any:
            run_manager.stops.append(request)
            return stop_result("refused")

        return SurfacePorts(
            dispatch=dispatch,
            inbox=self.inbox,
            decisions=self.broker,  # type: ignore[arg-type]
            audit=no_audit,
            stop=stop,
            register=run_manager.register_surface,
            listen=lambda listener: None,
            status=lambda: BotStatus(llm_configured=True, model="test"),
        )


def slack_settings(fake: FakeSlack, **extra: Any) -> Settings:
    return Settings(
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=fake.url,
        **extra,
    )


@pytest.fixture
async def surface_runtime(
    fake_slack: FakeSlack, inbox_db: Database
) -> AsyncIterator[SurfaceRuntime]:
    runtime = SurfaceRuntime(settings=slack_settings(fake_slack), db=inbox_db)
    yield runtime
    await runtime.inbox.close()


@pytest.fixture
async def slack_client(aiohttp_client, surface_runtime: SurfaceRuntime) -> TestClient:
    """A bare aiohttp app with only Slack mounted, over the recording runtime."""
    app = web.Application()
    setup_slack(app, surface_runtime.ports(), surface_runtime.settings)
    client = await aiohttp_client(app)
    client.inbound = app[SLACK_INBOUND_KEY]  # type: ignore[attr-defined]
    return client
