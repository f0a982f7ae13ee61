"""The aiohttp application of `chatops serve`: routes, start-up and shutdown.

`create_app(settings)` builds every long-lived object once and stores it on the app (no module
state): the runtime under `RUNTIME_KEY`, the one HTTP client session under `HTTP_KEY` (from
`bot.appkeys`, which surfaces may import). Routes are added before start-up (aiohttp freezes the
router); the I/O happens in one `cleanup_ctx` that opens and closes the runtime, in that order,
whatever fails.
"""

from __future__ import annotations

import argparse
import errno
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from bot.appkeys import HTTP_KEY, SETTINGS_KEY
from bot.clock import Clock
from bot.config import Settings, load_settings
from bot.engine.llm import LLM_NOT_CONFIGURED
from bot.errors import StartupError, UserError
from bot.loop_lag import LoopLag
from bot.runtime import Runtime
from bot.storage.database import safe_database_url
from bot.storage.single_process import single_process_guard
from bot.surfaces.console.routes import setup_console
from connectors.http import client_session

log = logging.getLogger("chatops")

RUNTIME_KEY = web.AppKey("runtime", Runtime)
LOOP_LAG_KEY = web.AppKey("loop_lag", LoopLag)
MAX_BODY_BYTES = 2 * 1024 * 1024
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
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
    """Readiness: 200 once started with the database answering, else 503; either way the
    connectors that are down (an MCP server unreachable: left out, retried) or left out
    (secrets not set). A connector that is down does not make the bot unready: the rest works."""
    runtime = request.app[RUNTIME_KEY]
    database = runtime.opened and await runtime.check_database()
    body = {
        "ready": database,
        "database": database,
        "recovering": runtime.recovering,
        "connectors_down": [down.as_json(full=False) for down in runtime.connectors_down],
        "connectors_left_out": list(runtime.left_out_connectors),
    }
    return web.json_response(body, status=200 if database else 503)


def create_app(settings: Settings, *, clock: Clock | None = None) -> web.Application:
    """The whole bot as one aiohttp application (console always; Slack/Feishu when configured);
    `clock`: the approvals' time (tests pass a `ManualClock`)."""
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    runtime = Runtime.create(settings, clock=clock)
    app[SETTINGS_KEY] = settings
    app[RUNTIME_KEY] = runtime
    app[LOOP_LAG_KEY] = LoopLag()
    app.cleanup_ctx.append(_loop_lag_context)
    app.cleanup_ctx.append(_runtime_context)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    ports = runtime.surface_ports()  # what each surface gets instead of the runtime
    setup_console(app, ports, runtime.console_ports(), settings)
    runtime.surfaces.append("console")
    if settings.slack_enabled:
        from bot.surfaces.slack.inbound import setup_slack

        setup_slack(app, ports, settings)
        runtime.surfaces.append("slack")
    if settings.feishu_enabled:
        from bot.surfaces.feishu.surface import setup_feishu

        setup_feishu(app, ports, settings)
        runtime.surfaces.append("feishu")
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
    """One client session for the whole process; the runtime opened on it, closed after."""
    runtime = app[RUNTIME_KEY]
    async with client_session() as session:
        app[HTTP_KEY] = session
        try:
            await runtime.open(session)
            yield
        finally:
            await runtime.close()


def _add_scheduler(app: web.Application, runtime: Runtime) -> None:
    """Scheduled audit reports and approval expiry (bot/audit/schedule.py), owned by the app."""
    try:
        from bot.audit.schedule import scheduler_context
    except ImportError:
        return
    app.cleanup_ctx.append(scheduler_context(runtime))


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


def _describe_surfaces(settings: Settings) -> list[str]:
    described = ["console (GET /)"]
    if settings.slack_enabled:
        mode = "Socket Mode" if settings.slack_app_token is not None else "HTTP POST /slack/events"
        described.append(f"slack ({mode})")
    else:
        described.append("slack off (set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET)")
    if settings.feishu_enabled:
        mode = "long connection" if settings.feishu_mode == "longconn" else "POST /feishu/events"
        described.append(f"feishu ({mode})")
    else:
        described.append("feishu off (set FEISHU_APP_ID and FEISHU_APP_SECRET)")
    return described


def serve_command(args: argparse.Namespace) -> int:
    """`chatops serve`: run until interrupted (Ctrl+C / SIGTERM)."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # the revision is logged once below
    settings = load_settings()
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


def _serve(settings: Settings, host: str, port: int) -> int:
    app = create_app(settings)
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
