"""The aiohttp application of `chatops serve`: routes, start-up and shutdown.

`create_app(settings)` builds every long-lived object once and stores it on the app (no module
state): the runtime under `RUNTIME_KEY`, the HTTP client sessions under `HTTP_KEY` (connectors)
and `PLATFORM_HTTP_KEY` (the chat platforms; both from `bot.appkeys`, which surfaces may
import). Routes are added before start-up (aiohttp freezes the
router); the I/O happens in one `cleanup_ctx` that opens and closes the runtime, in that order,
whatever fails.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from bot.appkeys import HTTP_KEY, PLATFORM_HTTP_KEY, SETTINGS_KEY
from bot.clock import Clock
from bot.config import Settings
from bot.engine.llm import LLM_NOT_CONFIGURED
from bot.errors import StartupError, UserError
from bot.loop_lag import LoopLag
from bot.observability.logs import configure_logging
from bot.readiness import Check, DatabaseProbe, ModelProbe
from bot.redaction import install_log_redaction
from bot.runtime import Runtime
from bot.startup_imports import freeze_once_started
from bot.storage.database import safe_database_url
from bot.storage.single_process import single_process_guard
from bot.surfaces.console.guard import is_local_request
from bot.surfaces.console.routes import setup_console
from bot.triggers.delivery import Deliveries
from bot.triggers.route import setup_triggers
from connectors.http import client_session
from connectors.oauth_routes import setup_oauth_routes

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from bot.surfaces.slack.oauth import OAuthStores

log = logging.getLogger("chatops")

RUNTIME_KEY = web.AppKey("runtime", Runtime)
LOOP_LAG_KEY = web.AppKey("loop_lag", LoopLag)
MODEL_PROBE_KEY = web.AppKey("model_probe", ModelProbe)
DATABASE_PROBE_KEY = web.AppKey("database_probe", DatabaseProbe)
# the audit schedule's next firing and what this process's latest firing did (`/readyz`)
AUDIT_STATUS_KEY: web.AppKey[Callable[[], dict[str, object]]] = web.AppKey("audit_status")
MAX_BODY_BYTES = 2 * 1024 * 1024
PLATFORM_CONNECTIONS = 256  # sockets to the chat platforms at once (a burst's calls queue past it)
_LISTEN_ERRORS = (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL)


async def healthz(request: web.Request) -> web.Response:
    """Liveness for load balancers: 200 when the database answers, 503 when it does not.
    While start-up recovery still runs (in the background) the body says `recovering`; either
    way `loop_lag_ms` says how late the event loop has been of late (a blocked loop delays
    every request)."""
    runtime = request.app[RUNTIME_KEY]
    lag = request.app[LOOP_LAG_KEY].summary()
    if await runtime.check_database():
        body: dict[str, object] = {"ok": True}
        if runtime.recovering:
            body["recovering"] = True
        return web.json_response({**body, "loop_lag_ms": lag})
    body = {"ok": False, "error": "database unavailable", "loop_lag_ms": lag}
    return web.json_response(body, status=503)


async def readyz(request: web.Request) -> web.Response:
    """Readiness, each check named: `database` (reachable and migrated to head), `model`
    (configured and answering, cached), `surfaces` (each one's credentials accepted), the
    connectors down or left out, and those failing (circuit breaker open or half-open), and
    the audit schedule (next firing; what this process's latest firing posted and why a
    channel got nothing).
    `ready` (and 200) needs start-up done and the database ready; else 503. A surface, the
    model or a connector that is down is reported with its reason but leaves the bot ready:
    the rest of it works (docs/operations.md)."""
    runtime = request.app[RUNTIME_KEY]
    if runtime.opened:
        probe = request.app[DATABASE_PROBE_KEY]
        database = await asyncio.to_thread(probe.check, runtime.engine)
    else:
        database = Check(False, "starting")
    model = await request.app[MODEL_PROBE_KEY].check(request.app[HTTP_KEY])
    ready = runtime.opened and database.ok
    body = {
        "ready": ready,
        "database": database.as_json(),
        "model": model.as_json(),
        "surfaces": runtime.health.as_json(),
        "recovering": runtime.recovering,
        "connectors_down": [down.as_json(full=False) for down in runtime.connectors_down],
        "connectors_left_out": list(runtime.left_out_connectors),
        "connectors_failing": [breaker.as_json() for breaker in runtime.connectors_failing],
        "audit_schedule": request.app[AUDIT_STATUS_KEY](),
    }
    return web.json_response(body, status=200 if ready else 503)


METRICS_LOCAL_ONLY = (
    "GET /metrics answers local clients only, never through a proxy "
    "(set CHATOPS_METRICS_TOKEN to let a scraper elsewhere in with Authorization: Bearer ...)"
)
METRICS_NEEDS_TOKEN = "GET /metrics needs CHATOPS_METRICS_TOKEN as Authorization: Bearer ..."


async def metrics(request: web.Request) -> web.Response:
    """Prometheus scrape: the runtime's own registry (`bot.observability.metrics`), the gauges
    read now. Loopback clients only (no proxy, a loopback host name), unless
    `CHATOPS_METRICS_TOKEN` is set: then every client, local ones too, presents it."""
    refused = _metrics_refusal(request, request.app[SETTINGS_KEY])
    if refused is not None:
        return refused
    runtime = request.app[RUNTIME_KEY]
    try:
        await runtime.refresh_gauges()
        runtime.metrics.database_up.set(1)
    except SQLAlchemyError:  # the counters still tell what happened before the outage
        log.warning("metrics: the database is unreachable; gauges read from it are stale")
        runtime.metrics.database_up.set(0)
    runtime.metrics.set_loop_lag(request.app[LOOP_LAG_KEY].summary())
    body, content_type = runtime.metrics.render(request.headers.get("Accept"))
    return web.Response(body=body, headers={"Content-Type": content_type})


def _metrics_refusal(request: web.Request, settings: Settings) -> web.Response | None:
    """401 without the right token when one is set (compared in constant time); else 403
    for a client that is not local. None: the scrape may go on."""
    token = settings.chatops_metrics_token
    if token is not None:
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        expected = token.get_secret_value().encode()
        given = presented.strip().encode("utf-8", "replace")
        if scheme.lower() == "bearer" and hmac.compare_digest(given, expected):
            return None
        return web.Response(
            status=401,
            text=METRICS_NEEDS_TOKEN,
            headers={"WWW-Authenticate": 'Bearer realm="chatops metrics"'},
        )
    if not is_local_request(request):
        return web.Response(status=403, text=METRICS_LOCAL_ONLY)
    return None


def create_app(
    settings: Settings, *, clock: Clock | None = None, span_exporter: SpanExporter | None = None
) -> web.Application:
    """The whole bot as one aiohttp application (console always; Slack/Feishu when configured);
    `clock`: the approvals' time (tests pass a `ManualClock`); `span_exporter`: where spans go
    when traces are on (tests pass an in-memory one; default: OTLP/HTTP)."""
    problem = settings.slack_mode_problem()
    if problem is not None:
        raise StartupError(problem)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    runtime = Runtime.create(settings, clock=clock, span_exporter=span_exporter)
    app[SETTINGS_KEY] = settings
    app[RUNTIME_KEY] = runtime
    app[LOOP_LAG_KEY] = LoopLag(on_sample=runtime.metrics.loop_lag_sample)
    app[MODEL_PROBE_KEY] = ModelProbe(settings)
    app[DATABASE_PROBE_KEY] = DatabaseProbe()
    app.cleanup_ctx.append(_loop_lag_context)
    app.cleanup_ctx.append(_runtime_context)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    ports = runtime.surface_ports()  # what each surface gets instead of the runtime
    setup_console(app, ports, runtime.console_ports(), settings)
    runtime.surfaces.append("console")
    runtime.health.up("console")
    if settings.slack_enabled:
        from bot.surfaces.slack.inbound import setup_slack

        stores = _slack_stores(settings, runtime)
        setup_slack(
            app, ports, settings, meter=runtime.metrics.platform("slack"), oauth_stores=stores,
        )  # fmt: skip
        if stores is not None:
            app.cleanup_ctx.append(_key_opens_installations(stores))
        runtime.surfaces.append("slack")
    if settings.feishu_enabled:
        from bot.surfaces.feishu.mount import mount_feishu

        mount_feishu(
            app, ports, settings, runtime.feishu_apps, meter=runtime.metrics.platform("feishu")
        )
        runtime.surfaces.append("feishu")
    setup_triggers(app, Deliveries(runtime.triggers, runtime.trigger_ports()))
    setup_oauth_routes(app, lambda: runtime.oauth if runtime.oauth and runtime.oauth.connectors
                       else None)  # fmt: skip
    _add_scheduler(app, runtime)
    app.on_startup.append(_log_startup)
    return app


async def _loop_lag_context(app: web.Application) -> AsyncIterator[None]:
    """The loop-lag monitor runs for the app's whole life (first in, last out)."""
    monitor = app[LOOP_LAG_KEY]
    monitor.start()
    try:
        yield
    finally:
        await monitor.stop()


async def _runtime_context(app: web.Application) -> AsyncIterator[None]:
    """Two client sessions for the whole process, the runtime opened on them, closed after:
    the connectors' (bounded by CHATOPS_CONNECTOR_MAX_CONNECTIONS) and the chat platforms'.
    Apart, so that connector APIs that stall, holding every connection of their pool, never
    hold up a status message, an approval card or an answer."""
    runtime = app[RUNTIME_KEY]
    limit = runtime.settings.chatops_connector_max_connections
    async with client_session(limit) as session, platform_session() as platforms:
        app[HTTP_KEY] = session
        app[PLATFORM_HTTP_KEY] = platforms
        try:
            await runtime.open(session)
            yield
        finally:
            await runtime.close()


def platform_session() -> aiohttp.ClientSession:
    """The chat platforms' client session: their calls are paced by the platforms' budgets
    (`bot.surfaces.slack.limiter`), so the pool only bounds the sockets a burst opens."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=PLATFORM_CONNECTIONS))


def _add_scheduler(app: web.Application, runtime: Runtime) -> None:
    """Scheduled audit reports (bot/audit/schedule.py), owned by the app."""
    from bot.audit.schedule import scheduler_context

    context = scheduler_context(runtime)
    app[AUDIT_STATUS_KEY] = context.scheduler.status
    app.cleanup_ctx.append(context)


async def _log_startup(app: web.Application) -> None:
    runtime = app[RUNTIME_KEY]
    settings = runtime.settings
    if settings.llm_configured:
        where = settings.openai_base_url or "the OpenAI API"
        log.info("LLM: model %s at %s", settings.chatops_model, where)
    else:
        log.warning(
            "%s (the web console shows this; runs fail until it is set)", LLM_NOT_CONFIGURED
        )
    log.info("surfaces on: %s", ", ".join(_describe_surfaces(settings)))


def _slack_stores(settings: Settings, runtime: Runtime) -> OAuthStores | None:
    """OAuth mode's installation and state stores on the bot's database (None: one token);
    the tokens sealed with CHATOPS_CREDENTIALS_KEY (a malformed key: StartupError)."""
    if not settings.slack_oauth or not settings.slack_client_id:
        return None
    from bot.storage.sealing import Sealer
    from bot.storage.slack_installs import DatabaseInstallationStore, DatabaseStateStore
    from bot.surfaces.slack.oauth import OAuthStores

    assert settings.chatops_credentials_key is not None  # slack_mode_problem
    sealer = Sealer(settings.chatops_credentials_key.get_secret_value())
    return OAuthStores(
        installations=DatabaseInstallationStore(runtime.db, settings.slack_client_id, sealer),
        states=DatabaseStateStore(runtime.db),
    )


def _key_opens_installations(
    stores: OAuthStores,
) -> Callable[[web.Application], AsyncIterator[None]]:
    """A start-up step after the migration: CHATOPS_CREDENTIALS_KEY opens the stored Slack
    tokens (a changed key stops `chatops serve` with one line, not a traceback per event)."""

    from bot.storage.slack_installs import DatabaseInstallationStore

    async def check(app: web.Application) -> AsyncIterator[None]:
        if isinstance(stores.installations, DatabaseInstallationStore):
            await stores.installations.check_key()
        yield

    return check


def _describe_surfaces(settings: Settings) -> list[str]:
    described = ["console (GET /)"]
    if settings.slack_enabled:
        mode = "Socket Mode" if settings.slack_app_token is not None else "HTTP POST /slack/events"
        if settings.slack_oauth:
            mode += ", OAuth installs at GET /slack/install"
        described.append(f"slack ({mode})")
    else:
        described.append("slack off (set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET)")
    if settings.feishu_enabled:
        mode = "long connection" if settings.feishu_mode == "longconn" else "POST /feishu/events"
        if settings.chatops_feishu_apps_file is not None:
            mode = f"{mode}, and POST /feishu/events/<app> for CHATOPS_FEISHU_APPS_FILE's apps"
        described.append(f"feishu ({mode})")
    else:
        described.append("feishu off (set FEISHU_APP_ID and FEISHU_APP_SECRET)")
    return described


def serve_command(args: argparse.Namespace, settings: Settings) -> int:
    """`chatops serve`: run until interrupted (Ctrl+C / SIGTERM). `settings`: loaded, and
    their `DATABASE_URL` prepared, by `bot.cli` before it imports this module (a bad
    configuration is told without the bot's imports)."""
    configure_logging(settings.chatops_log_level, settings.chatops_log_format)
    lock = single_process_guard(settings.database_url)
    try:
        if lock is not None:
            lock.acquire()  # before anything touches the file: a second process stops here
        return _serve(settings, args.host, args.port or settings.port)
    except StartupError as exc:
        raise UserError(str(exc)) from None
    finally:
        if lock is not None:
            lock.release()


def serving_app(settings: Settings) -> web.Application:
    """`create_app` as `chatops serve` runs it: every log line redacted, and what start-up
    made frozen for the collector once the app has started (`freeze_once_started`)."""
    app = create_app(settings)
    app.on_startup.append(freeze_once_started)  # last: after the runtime opened
    install_log_redaction(app[RUNTIME_KEY].redactor)  # every log line, every known secret
    return app


def _serve(settings: Settings, host: str, port: int) -> int:
    app = serving_app(settings)
    shown = "localhost" if host in ("0.0.0.0", "::", "") else host
    log.info(
        "chatops serving on %s:%d (database %s)",
        host,
        port,
        safe_database_url(settings.database_url),
    )
    log.info("web console: http://%s:%d/%s", shown, port, _console_note(settings, host))
    try:
        web.run_app(app, host=host, port=port, print=_log_listening, access_log=None)
    except OSError as exc:
        if exc.errno not in _LISTEN_ERRORS:
            raise
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return 0


def _log_listening(banner: str) -> None:
    """aiohttp's "==== Running on ... ====" banner, as one log line once the port is open."""
    log.info("%s", " ".join(banner.replace("=", " ").split()))


def _console_note(settings: Settings, host: str) -> str:
    if settings.chatops_console_public:
        return " (CHATOPS_CONSOLE_PUBLIC=true: open to every client with CHATOPS_CONSOLE_TOKEN)"
    if host in ("127.0.0.1", "localhost", "::1"):
        return ""
    return (
        " (answers local clients only, never through a proxy; "
        "CHATOPS_CONSOLE_PUBLIC=true with CHATOPS_CONSOLE_TOKEN opens it)"
    )
