"""Runtime test harness: the real ReActAgent on FakeOpenAI, a RecordingSurface, a real database.

`make_app()` builds what `bot.runtime` builds (broker, agent with the runtime hooks, run manager)
on one database; calling it twice on the same database is "a new process after a restart".
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from bot.approvals.broker import ApprovalBroker
from bot.approvals.schema import ApprovalPolicy, policy_metadata
from bot.chat.threads import InboundMessage, ThreadRef
from bot.config import Settings
from bot.engine.agent import ReActAgent
from bot.engine.hooks import PreHook
from bot.engine.tools import Tool, ToolRegistry, ToolResult
from bot.runs.manager import RunManager
from bot.runs.peers import PeerSync
from bot.runs.recovery import Recovery
from bot.storage.database import Database, open_database
from bot.storage.models import Approval, CallLog, Run
from hooks.chain import Pre, runtime_chain
from hooks.guards import ReadOnlyGuard
from tests.fakes.fixtures import fake_openai, make_llm  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording import RecordingSurface

SECRET = "sk-live-0123456789abcdef"


@dataclass
class CountingTool:
    """A tool that records every invocation (the proof that a tool ran, and how often)."""

    name: str
    policy: ApprovalPolicy
    result: str = "ok"
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def invoke(self, args: dict[str, Any]) -> ToolResult:
        self.calls.append(dict(args))
        return ToolResult(f"{self.result} token={SECRET}")

    def tool(self) -> Tool:
        connector, action = self.name.split("__")
        return Tool(
            name=self.name,
            description=f"{action} on {connector}",
            parameters={"type": "object", "properties": {"service": {"type": "string"}}},
            invoke=self.invoke,
            connector=connector,
            action=action,
            metadata=policy_metadata(self.policy),
            secret_values=lambda: [SECRET],
        )


@dataclass
class App:
    """One "process": broker, agent, run manager and surface on a shared database."""

    engine: Engine
    broker: ApprovalBroker
    manager: RunManager
    surface: RecordingSurface
    agent: ReActAgent
    recovery: Recovery
    peers: PeerSync

    async def close(self) -> None:
        """As the runtime stops: recovery, the runs, then the leases (released)."""
        await self.recovery.close()
        await self.manager.close()
        await self.peers.close()
        await self.agent.llm.close()  # type: ignore[attr-defined]


class Harness:
    """Builds apps and messages for one test."""

    def __init__(self, engine: Engine, fake: FakeOpenAI) -> None:
        self.engine = engine
        self.db = Database(engine)
        self.fake = fake
        self.apps: list[App] = []
        self._events = itertools.count(1)
        self.tools: dict[str, CountingTool] = {
            "ops__restart": CountingTool(
                "ops__restart", ApprovalPolicy(approval="required", mutating=True, risk="high")
            ),
            "ops__status": CountingTool("ops__status", ApprovalPolicy(approval="never")),
        }

    def add_tool(self, name: str, policy: ApprovalPolicy) -> CountingTool:
        self.tools[name] = CountingTool(name, policy)
        return self.tools[name]

    async def app(
        self,
        *,
        read_only: bool = False,
        extra_pre: Sequence[PreHook] = (),
        status_interval_s: float = 0.01,
        **settings: Any,
    ) -> App:
        values: dict[str, Any] = {
            "chatops_approval_escalate_after_s": 0,
            "chatops_approval_remind_at": 0,
        }
        values.update(settings)
        config = Settings(**values)
        broker = ApprovalBroker(db=self.db, settings=config)
        guard = ReadOnlyGuard(enabled=True) if read_only else None
        hooks = runtime_chain(broker=broker, db=self.db, read_only=guard)
        for hook in extra_pre:  # right after the gate, before the write-ahead row
            hooks.add_pre(hook, priority=Pre.APPROVAL_GATE)
        registry = ToolRegistry(t.tool() for t in self.tools.values())
        agent = ReActAgent(make_llm(self.fake), registry, hooks=hooks, completion_check=False)
        manager = RunManager(
            db=self.db,
            agent=agent,
            broker=broker,
            settings=config,
            status_interval_s=status_interval_s,
        )
        surface = RecordingSurface("test")
        manager.register_surface(surface)
        recovery = Recovery(db=self.db, run_manager=manager, broker=broker)
        peers = PeerSync(
            runs=manager, broker=broker, wakeups=manager.wakeups,
            look_for_orphans=recovery.kick, stopped_elsewhere=manager.stopped_elsewhere,
        )  # fmt: skip
        await peers.start()
        recovery.start()
        await recovery.wait(30)
        app = App(self.engine, broker, manager, surface, agent, recovery, peers)
        self.apps.append(app)
        return app

    def message(
        self,
        text: str,
        *,
        user: str = "U_DEV",
        root: str = "1000.1",
        event_id: str | None = None,
        mentions_bot: bool = True,
    ) -> InboundMessage:
        return InboundMessage(
            thread=ThreadRef("test", "T1", "C1", root),
            event_id=event_id or f"Ev{next(self._events)}",
            user_id=user,
            text=text,
            message_id=f"msg{next(self._events)}",
            mentions_bot=mentions_bot,
        )

    def rows(self, model: type, **where: Any) -> list[Any]:
        with Session(self.engine) as session:
            query = select(model)
            for key, value in where.items():
                query = query.where(getattr(model, key) == value)
            return list(session.exec(query).all())

    def calls(self, **where: Any) -> list[CallLog]:
        return self.rows(CallLog, **where)

    def approvals(self, **where: Any) -> list[Approval]:
        return self.rows(Approval, **where)

    def runs(self, **where: Any) -> list[Run]:
        return self.rows(Run, **where)


async def wait_until_waiting(app: App) -> None:
    """Wait until the status message shows a step waiting for approval (the gate is waiting)."""
    await app.surface.wait_for(
        lambda: any(
            any(step.state == "waiting_approval" for step in call.payload.steps)
            for call in app.surface.of("update_status")
        )
    )


async def wait_for_step(app: App, label: str, state: str) -> None:
    """Wait until the status message shows the step `label` in `state`."""
    await app.surface.wait_for(
        lambda: any(
            any(step.label == label and step.state == state for step in call.payload.steps)
            for call in app.surface.of("update_status")
        )
    )


def tool_messages(fake: FakeOpenAI) -> list[str]:
    """Every tool-result text the model was shown (last request)."""
    return [m["content"] for m in fake.messages() if m.get("role") == "tool"]


def all_text(fake: FakeOpenAI, predicate: Callable[[dict[str, Any]], bool]) -> list[str]:
    """Contents of messages matching `predicate` across every request."""
    return [
        str(m.get("content"))
        for body in fake.requests
        for m in body.get("messages", [])
        if predicate(m)
    ]


@pytest.fixture
async def harness(
    database_url: str,
    fake_openai: FakeOpenAI,  # noqa: F811
) -> AsyncIterator[Harness]:
    engine = open_database(database_url)
    h = Harness(engine, fake_openai)
    try:
        yield h
    finally:
        for app in h.apps:
            await app.close()
        h.db.close()
        engine.dispose()
