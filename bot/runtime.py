"""The runtime: every long-lived object of one bot process, built once and owned by the app.

Built in two steps because aiohttp freezes its router before start-up: `Runtime.create(settings)`
makes the objects surfaces need while routes are added (run manager, broker, an empty tool
registry); `await runtime.open(http)` does the I/O at start-up (schema migration, connector
manifests and MCP servers) and starts recovery in the background (`bot.runs.recovery`: resuming
waiting runs, failing interrupted ones). `build_runtime(settings, http)` does both.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp
from sqlalchemy import Engine, text
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from bot.approvals.applier import decision_applier
from bot.approvals.broker import ApprovalBroker
from bot.audit.browse import CallLogBrowser
from bot.audit.command import handle_audit_command
from bot.audit.sinks.sender import SinkSender
from bot.audit.sinks.wiring import build_sinks, configured_sinks, sink_sender
from bot.audit.tool import AUDIT_TOOL_NAME, audit_report_tool
from bot.chat.audit_report import AuditChatReply, Place
from bot.chat.health import SurfaceHealth
from bot.chat.ports import SurfacePorts
from bot.chat.views import BotStatus
from bot.chat.workspaces import WorkspacePolicies
from bot.clock import AlignedClock, Clock
from bot.config import Settings, connector_environ
from bot.engine.agent import ReActAgent
from bot.engine.hooks import HookRegistry
from bot.engine.llm import OpenAICompatibleLLM
from bot.engine.tools import Tool, ToolRegistry
from bot.errors import StartupError
from bot.inbox.inbox import Inbox
from bot.model_http import model_http_client
from bot.observability.db_statements import count_statements
from bot.observability.metrics import Metrics, WorkspaceLabels
from bot.observability.traced_llm import TracedLLM
from bot.observability.tracing import Tracing
from bot.redaction import Redactor
from bot.runs.feedback import FeedbackRecorder
from bot.runs.leases import LeaseKeeper, ProcessIdentity
from bot.runs.manager import RunManager
from bot.runs.peers import PeerSync
from bot.runs.recovery import Recovery
from bot.storage.console import ConsoleStore
from bot.storage.database import (
    Database,
    create_db_engine,
    db_error_reason,
    init_schema,
    safe_database_url,
)
from bot.storage.gauges import gauge_readings
from bot.storage.wakeups import wakeups_for
from bot.surfaces.console.ports import ConsolePorts
from bot.surfaces.feishu.apps import FeishuApp, load_feishu_apps
from bot.triggers.delivery import TriggerPorts
from bot.triggers.hub import TriggerHub
from bot.triggers.loading import TriggerFileError
from bot.workspaces import load_workspaces
from connectors.breaker import CircuitBreaker, breakers_for
from connectors.connector_set import ConnectorSet
from connectors.manifest import ManifestError
from connectors.mcp_recovery import DownServer
from connectors.oauth_disconnect import DISCONNECT_TOOL_NAME, disconnect_tool
from connectors.oauth_service import OAuthService
from connectors.oauth_vault import CredentialVault
from connectors.schema_fit import SchemaBudget
from hooks.chain import serve_chain

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Runtime:
    """The bot's objects: `.settings .engine .db .llm .tools .hooks .agent .broker .run_manager`;
    `.redactor`: every secret the process knows, masked in every output; `.metrics`: this
    runtime's instruments and registry (`GET /metrics`); `.tracing`: its traces (no-op unless
    the `OTEL_*` settings switch them on)."""

    settings: Settings
    redactor: Redactor
    metrics: Metrics
    engine: Engine
    db: Database
    llm: OpenAICompatibleLLM
    tools: ToolRegistry
    hooks: HookRegistry
    agent: ReActAgent
    broker: ApprovalBroker
    run_manager: RunManager
    inbox: Inbox
    recovery: Recovery
    peers: PeerSync
    triggers: TriggerHub = field(default_factory=TriggerHub)
    feishu_apps: tuple[FeishuApp, ...] = ()  # every Feishu app served, checked at construction
    tracing: Tracing = field(default_factory=Tracing.off)
    surfaces: list[str] = field(default_factory=list)
    health: SurfaceHealth = field(default_factory=SurfaceHealth)  # each surface's credentials
    skipped_connectors: list[str] = field(default_factory=list)
    schema_revision: str = ""
    process_id: str = ""  # this process's id in leases (runs, inbox, audit sinks)
    clock: Clock = field(default_factory=Clock)  # wall time (approvals, connector breakers)
    sink_sender: SinkSender | None = None  # ships the audit outbox; set by `open`
    oauth: OAuthService | None = None  # people's connector credentials (CHATOPS_CREDENTIALS_KEY)
    workspaces: WorkspacePolicies = field(default_factory=WorkspacePolicies)  # per-workspace
    _connectors: ConnectorSet | None = None
    _opened: bool = False

    @classmethod
    def create(
        cls,
        settings: Settings,
        *,
        clock: Clock | None = None,
        span_exporter: SpanExporter | None = None,
    ) -> Runtime:
        """Construct without I/O (no database connection, no manifests read yet); `clock`: the
        approvals' time (deadlines, escalation tiers), a `ManualClock` in tests;
        `span_exporter`: where spans go when the settings switch traces on (default: OTLP/HTTP
        to their endpoint; a test's in-memory exporter)."""
        try:
            engine = create_db_engine(settings.database_url)
        except (ArgumentError, ImportError) as exc:
            url = safe_database_url(settings.database_url)
            raise StartupError(f"DATABASE_URL {url} is not usable: {exc}") from None
        db = Database(engine, audit_sinks=configured_sinks(settings))
        triggers = _load_triggers(settings)
        feishu_apps = load_feishu_apps(settings) if settings.feishu_enabled else ()
        workspaces = load_workspaces(
            settings.chatops_workspaces_file, settings.chatops_manifests_dir
        )
        # this runtime's own registry, never the library's global one
        metrics = Metrics(workspaces=WorkspaceLabels(settings.chatops_metrics_workspaces))
        count_statements(engine, metrics)
        llm = OpenAICompatibleLLM.from_settings(
            settings, meter=metrics, http_client=model_http_client()
        )
        tools = ToolRegistry()
        # the settings' secrets and every loaded connector's (read when asked: late MCP tools)
        redactor = Redactor(
            [
                *settings.secret_values(),
                *triggers.secrets(),
                *(secret for app in feishu_apps for secret in app.secrets()),
            ],
            source=tools.secret_values,
        )
        wakeups = wakeups_for(settings.database_url)
        identity = ProcessIdentity.of_this_process(settings.chatops_node_name)
        if clock is None:  # approvals go by the database's clock, measured at every beat
            aligned = AlignedClock()
            clock = aligned
        else:
            aligned = None
        leases = LeaseKeeper(db, identity, settings.chatops_lease_s, clock=aligned)
        broker = ApprovalBroker(
            db=db, settings=settings, clock=clock, wakeups=wakeups, metrics=metrics,
            tools=tools.get,  # the registry as it grows (late MCP tools too)
            workspaces=workspaces,
        )  # fmt: skip
        tracing = Tracing.start(settings.trace_config, exporter=span_exporter)
        tracer = tracing.tracer if tracing.enabled else None  # off: no span hook, no wrapper
        oauth = oauth_service(settings, db)
        hooks = serve_chain(
            settings, db=db, broker=broker, redactor=redactor, oauth=lambda: oauth,
            metrics=metrics, tracer=tracer, workspaces=workspaces,
        )  # fmt: skip
        compact_llm = llm.compact_llm(settings)
        agent = ReActAgent(
            llm if tracer is None else TracedLLM(llm, tracer),
            tools,
            hooks=hooks,
            limits=settings.engine_limits,
            compact_llm=compact_llm if tracer is None or compact_llm is None
            else TracedLLM(compact_llm, tracer),
        )  # fmt: skip
        run_manager = RunManager(
            db=db, agent=agent, broker=broker, settings=settings, leases=leases, wakeups=wakeups,
            redactor=redactor, status_interval_s=settings.chatops_status_edit_interval_s,
            answer_interval_s=settings.chatops_answer_stream_interval_s, metrics=metrics,
            tracing=tracing, workspaces=workspaces,
        )  # fmt: skip
        inbox = Inbox(
            db,
            dispatch=run_manager.dispatch,
            decide=decision_applier(broker, run_manager.surfaces),
            feedback=FeedbackRecorder(db),
            ready=run_manager.wait_ready,
            owner=leases.me,
            claim_orphans=leases.claim_inbox,
        )
        recovery = Recovery(db=db, run_manager=run_manager, broker=broker, adopt_inbox=inbox.adopt)
        peers = PeerSync(
            runs=run_manager,
            broker=broker,
            wakeups=wakeups,
            look_for_orphans=recovery.kick,
            stopped_elsewhere=run_manager.stopped_elsewhere,
        )
        return cls(
            settings=settings,
            redactor=redactor,
            metrics=metrics,
            engine=engine,
            db=db,
            llm=llm,
            tools=tools,
            hooks=hooks,
            agent=agent,
            broker=broker,
            run_manager=run_manager,
            inbox=inbox,
            recovery=recovery,
            peers=peers,
            triggers=triggers,
            feishu_apps=feishu_apps,
            tracing=tracing,
            process_id=identity.id,
            clock=clock,
            oauth=oauth,
            workspaces=workspaces,
        )

    async def open(self, http: aiohttp.ClientSession) -> None:
        """Start-up I/O: migrate, load connectors; then recovery starts in the background (the
        server listens meanwhile: `recovering` says when it is done). Raises `StartupError`."""
        url = safe_database_url(self.settings.database_url)
        try:
            key = self.settings.chatops_credentials_key
            self.schema_revision = await asyncio.to_thread(
                init_schema, self.engine, key.get_secret_value() if key is not None else None
            )
        except SQLAlchemyError as exc:
            reason = db_error_reason(exc)
            raise StartupError(f"cannot open the database {url}: {reason}") from None
        log.info("database %s ready (schema revision %s)", url, self.schema_revision)
        await self._load_tools(http)
        sinks = build_sinks(self.settings, http)
        self.sink_sender = sink_sender(self.settings, self.db, sinks, holder=self.process_id)
        if self.sink_sender is not None:
            self.sink_sender.start()
            log.info("audit sinks: %s", ", ".join(self.sink_sender.sink_names))
        await self.peers.start()  # registered before anything is taken over
        self.recovery.start()
        self._opened = True

    @property
    def recovering(self) -> bool:
        """Start-up recovery (resuming and failing interrupted runs) is still going on."""
        return self.recovery.recovering

    async def _load_tools(self, http: aiohttp.ClientSession) -> None:
        directory = self.settings.chatops_manifests_dir
        explicit = "chatops_manifests_dir" in self.settings.model_fields_set
        if not directory.is_dir():
            if explicit:
                raise StartupError(
                    f"CHATOPS_MANIFESTS_DIR={directory} is not a directory of connector manifests"
                )
            log.warning(
                "no %s directory: no connector tools (set CHATOPS_MANIFESTS_DIR)", directory
            )
        else:
            try:
                self._connectors = await ConnectorSet.load(
                    directory,
                    http=http,
                    environ=connector_environ(),
                    schema_budget=SchemaBudget(
                        max_chars=self.settings.chatops_tool_schema_max_chars
                    ),
                    reserved=RESERVED_TOOL_NAMES,
                    breakers=breakers_for(self.settings, self.clock),
                    oauth=self.oauth,
                )
            except ManifestError as exc:
                raise StartupError(f"bad connector manifest: {exc}") from None
            if self.oauth is None and (names := self._connectors.oauth_connectors):
                raise StartupError(
                    f"connector {', '.join(names)} acts as people (auth type oauth2): set "
                    "CHATOPS_CREDENTIALS_KEY (their tokens are encrypted with it; make one with "
                    "`chatops credentials key`)"
                )
            if self.oauth is not None:
                self.oauth.bind(http)
            self.skipped_connectors = list(self._connectors.skipped)
            for tool in self._connectors.tools:
                self.tools.register(tool)
        for tool in builtin_tools(self):  # their names were reserved: no connector has them
            self.tools.register(tool)
        log.info("%d tools: %s", len(self.tools), ", ".join(self.tools.names()) or "(none)")
        if self._connectors is not None:
            self._connectors.keep_retrying(
                self._add_late_tools, max_delay_s=self.settings.chatops_mcp_retry_max_s
            )

    def _add_late_tools(self, tools: list[Tool]) -> str | None:
        """The tools of an MCP server that came up after start-up (runs that start from now on
        see them); None, or why they were refused (a name already taken)."""
        taken = [tool.name for tool in tools if tool.name in self.tools]
        if taken:
            return f"lists tools whose names are taken: {', '.join(taken)}"
        for tool in tools:
            self.tools.register(tool)
        return None

    @property
    def connectors(self) -> ConnectorSet | None:
        """The loaded connector manifests (None without a manifests directory)."""
        return self._connectors

    @property
    def opened(self) -> bool:
        """Start-up I/O is done (database migrated, connectors loaded)."""
        return self._opened

    @property
    def left_out_connectors(self) -> list[str]:
        """Names of connectors left out because their secret variables are not set."""
        return list(self._connectors.left_out) if self._connectors is not None else []

    @property
    def connectors_down(self) -> list[DownServer]:
        """MCP connectors left out because their server is down, and why (`GET /readyz`)."""
        return self._connectors.down if self._connectors is not None else []

    @property
    def connectors_failing(self) -> list[CircuitBreaker]:
        """Connectors whose circuit breaker is open or half-open (`GET /readyz`)."""
        return self._connectors.breakers.tripped() if self._connectors is not None else []

    def surface_ports(self) -> SurfacePorts:
        """What a surface is given: the run manager's dispatch and stop, the inbox, the broker's
        decisions, the chat audit command, registration, run events and the bot's status."""
        return SurfacePorts(
            dispatch=self.run_manager.dispatch,
            inbox=self.inbox,
            decisions=self.broker,
            audit=self.audit_command,
            stop=self.run_manager.stop_request,
            register=self.run_manager.register_surface,
            listen=self.run_manager.add_listener,
            status=self.status,
            health=self.health,
            end_workspace=self.run_manager.end_workspace,
            questions=self.run_manager.questions,
            live_processes=self.run_manager.leases.live_processes,
        )

    def trigger_ports(self) -> TriggerPorts:
        """What triggers are given: the database (alert claims), the inbox, the registered
        surfaces (threads are opened through them) and the run manager's stop."""
        return TriggerPorts(
            db=self.db,
            inbox=self.inbox,
            surfaces=self.run_manager.surfaces,
            stop=self.run_manager.stop_request,
        )

    def console_ports(self) -> ConsolePorts:
        """The web console's own ports: its conversations' store and the call log's queries."""
        return ConsolePorts(items=ConsoleStore(self.db), calls=CallLogBrowser(self.db))

    async def audit_command(self, user_id: str, text: str, place: Place) -> AuditChatReply | None:
        """A chat audit command (`audit 7d [connector] [share]`), answered without the model."""
        return await handle_audit_command(
            self.db, self.settings, user_id, text, place=place, workspaces=self.workspaces
        )

    def status(self) -> BotStatus:
        """What the web console shows: the model, the tools, the surfaces, the connectors left
        out or down."""
        return BotStatus(
            llm_configured=self.settings.llm_configured,
            model=self.settings.chatops_model,
            tools=tuple(sorted(self.tools.names())),
            surfaces=tuple(self.surfaces),
            skipped_connectors=tuple(self.skipped_connectors),
            connectors_down=tuple(down.as_json() for down in self.connectors_down),
        )

    async def refresh_gauges(self) -> None:
        """What a scrape reads now rather than counts as it happens: active runs, and from the
        database the approvals pending and this process's run leases. Raises `SQLAlchemyError`
        when the database is away (the scrape says so)."""
        readings = await self.db.run(gauge_readings, self.run_manager.leases.me)
        self.metrics.set_pending_approvals(readings.pending_approvals)
        self.metrics.set_audit_pending(self.db.audit_sinks, readings.audit_pending)
        self.metrics.set_gauges(
            active_runs=self.run_manager.active_count,
            leases_held=readings.leases_held,
            runs_queued=self.run_manager.admission.queued,
        )

    async def check_database(self) -> bool:
        """Liveness: can we run `SELECT 1`?"""

        def ping() -> None:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))

        try:
            await asyncio.to_thread(ping)
        except SQLAlchemyError as exc:
            reason = db_error_reason(exc)
            log.warning("health check: the database is unreachable: %s", reason)
            return False
        return True

    async def close(self) -> None:
        """Stop runs, MCP servers and the LLM client; release the database pool."""
        try:
            if self._opened:
                await self.recovery.close()
                await self.inbox.close()
                await self.run_manager.close()
                await self.peers.close()  # the runs are stopped: their leases go
        finally:
            if self.sink_sender is not None:  # after the runs: their last events are queued
                await self.sink_sender.close()
            if self._connectors is not None:
                await self._connectors.close()
            await self.llm.close()
            await asyncio.to_thread(self.db.close)  # calls in flight finish before the pool goes
            self.engine.dispose()
            await asyncio.to_thread(self.tracing.shutdown)  # the runs' last spans go out


def _load_triggers(settings: Settings) -> TriggerHub:
    """The triggers of CHATOPS_TRIGGERS_DIR (none when the default directory is missing); a
    file that does not validate stops start-up, one whose secret is unset is left off."""
    explicit = "chatops_triggers_dir" in settings.model_fields_set
    try:
        return TriggerHub.load(
            settings.chatops_triggers_dir,
            connector_environ(),
            explicit=explicit,
            slack_oauth=settings.slack_oauth,
        )
    except TriggerFileError as exc:
        raise StartupError(f"bad trigger: {exc}") from None


def oauth_service(settings: Settings, db: Database) -> OAuthService | None:
    """People's connector credentials, when CHATOPS_CREDENTIALS_KEY is set (a malformed key
    stops start-up)."""
    key = settings.chatops_credentials_key
    if key is None:
        return None
    return OAuthService(
        db=db,
        vault=CredentialVault(db, key.get_secret_value()),
        environ=connector_environ(),
        public_url=settings.public_url,
        link_ttl_s=settings.chatops_oauth_link_ttl_s,
    )


RESERVED_TOOL_NAMES = {
    AUDIT_TOOL_NAME: "the built-in audit report",
    DISCONNECT_TOOL_NAME: "the built-in disconnect of a person's own account",
}


def builtin_tools(runtime: Runtime) -> list[Tool]:
    """Tools that come with the bot rather than a manifest: the audit report (read-only), and
    with connectors that act as people, a person's disconnect of their own account."""
    tools = [audit_report_tool(runtime.db, runtime.settings)]
    if runtime.oauth is not None and runtime.oauth.connectors:
        tools.append(disconnect_tool(runtime.oauth))
    return tools


async def build_runtime(settings: Settings, http_session: aiohttp.ClientSession) -> Runtime:
    """A ready runtime (schema migrated, connectors loaded, waiting runs restored)."""
    runtime = Runtime.create(settings)
    try:
        await runtime.open(http_session)
    except BaseException:
        await runtime.close()
        raise
    return runtime
