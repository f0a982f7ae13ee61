"""Mounting the Feishu apps on the server: one `FeishuSurface` per app (its webhook route, its
credential check and lifecycle), registered together as one surface (`router.FeishuApps`)."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from bot.chat.ports import SurfacePorts
from bot.config import Settings
from bot.errors import StartupError
from bot.observability.metrics import PlatformMeter
from bot.surfaces.feishu.apps import FeishuApp, default_app
from bot.surfaces.feishu.router import FeishuApps
from bot.surfaces.feishu.signin import FeishuCredentials, Handler, unless_down
from bot.surfaces.feishu.surface import (
    FEISHU_KEY,
    MODES,
    FeishuSurface,
    app_sender,
    tenant_check,
    unconfigured_app,
)

FEISHU_APPS_KEY = web.AppKey("feishu_apps", FeishuApps)


def mount_feishu(
    app: web.Application,
    ports: SurfacePorts,
    settings: Settings,
    apps: Sequence[FeishuApp],
    *,
    meter: PlatformMeter | None = None,
) -> FeishuApps:
    """Every configured app's surface (`setup_feishu`), registered as the one `feishu`
    surface; `apps`: `load_feishu_apps`'s (empty: the FEISHU_* settings as they are)."""
    surfaces = setup_feishu(app, ports, settings, meter=meter, apps=apps or None)
    router = FeishuApps(surfaces, ports.inbox)
    app[FEISHU_APPS_KEY] = router
    ports.register(router)
    return router


def setup_feishu(
    app: web.Application,
    ports: SurfacePorts,
    settings: Settings,
    *,
    meter: PlatformMeter | None = None,
    apps: Sequence[FeishuApp] | None = None,
) -> list[FeishuSurface]:
    """Mount one surface per Feishu app: its webhook route (`FeishuApp.route`), its credential
    check and lifecycle (cleanup_ctx); `apps`: the configured ones (default: the FEISHU_* app);
    `meter`: where their Open API calls are counted. Returns the surfaces; the caller
    registers them as one (`router.FeishuApps`)."""
    if settings.feishu_mode not in MODES:
        raise StartupError(f"FEISHU_MODE must be one of {', '.join(MODES)}")
    configured = (
        list(apps) if apps is not None else [default_app(settings) or unconfigured_app(settings)]
    )
    served = {tenant for a in configured for tenant in a.tenant_keys}
    surfaces = []
    by_name: dict[str, Handler] = {}  # the apps of the file: POST /feishu/events/{app}
    for feishu_app in configured:
        _check_webhook_keys(feishu_app)
        try:
            sender = app_sender(feishu_app, meter=meter)
        except ValueError:  # lark-oapi refuses a domain that is not an https origin
            raise StartupError(
                f"{_domain_variable(feishu_app)} must be an https origin such as "
                "https://open.feishu.cn or https://open.larksuite.com (plain http only for "
                "127.0.0.1 test servers)"
            ) from None
        serves = tenant_check(feishu_app)
        if feishu_app.is_default and served:  # tenants another app answers are not its own
            serves = lambda tenant: tenant not in served  # noqa: E731
        surface = FeishuSurface(
            settings, dispatch=ports.dispatch, inbox=ports.inbox, audit=ports.audit,
            stop=ports.stop, sender=sender, decisions=ports.decisions, app=feishu_app,
            serves=serves, route_inbox=False, questions=ports.questions,
        )  # fmt: skip
        credentials = FeishuCredentials(feishu_app, ports.health)  # proved at start-up
        if feishu_app.mode == "webhook":
            route = unless_down(ports.health, surface.handle_webhook, feishu_app.health_name)
            if feishu_app.is_default:
                app.router.add_post(feishu_app.route, route)
            else:
                by_name[feishu_app.name] = route
        surface.signed_in = credentials.accepted
        app.cleanup_ctx.append(credentials.context)
        app.cleanup_ctx.append(surface.lifecycle)
        surfaces.append(surface)
    app.router.add_post("/feishu/events/{app}", _by_app(by_name))
    app[FEISHU_KEY] = surfaces[0]
    return surfaces


def _by_app(handlers: dict[str, Handler]) -> Handler:
    """One route for the file's apps: the webhook of the app its path names; 404 for a name
    no app has (nothing about the apps is told before a request is verified)."""

    async def feishu_app_events(request: web.Request) -> web.StreamResponse:
        handle = handlers.get(request.match_info["app"])
        if handle is None:
            return web.json_response({"error": "no such Feishu app"}, status=404)
        return await handle(request)

    return feishu_app_events


def _check_webhook_keys(feishu_app: FeishuApp) -> None:
    """A webhook app needs both keys (the apps file requires them; FEISHU_* may lack them)."""
    if feishu_app.mode != "webhook" or not feishu_app.is_default:
        return
    # Feishu puts the Verification Token in every push; lark-oapi refuses a push whose token
    # it cannot compare, so an encrypt key alone would start a bot that refuses every event.
    if feishu_app.verification_token is None:
        raise StartupError(
            "Feishu webhook mode needs FEISHU_VERIFICATION_TOKEN and FEISHU_ENCRYPT_KEY, "
            "or FEISHU_MODE=longconn"
        )
    # Without the encrypt key nothing a webhook receives is signed, and an approval click would
    # be trusted on the static verification token alone (sent in every push, so anyone who saw
    # one push could forge clicks).
    if feishu_app.encrypt_key is None:
        raise StartupError(
            "Feishu webhook mode needs FEISHU_ENCRYPT_KEY (set an Encrypt Key under Events & "
            "Callbacks > Encryption Strategy): without it requests are not signed and card "
            "clicks could be forged; or use FEISHU_MODE=longconn"
        )


def _domain_variable(feishu_app: FeishuApp) -> str:
    return (
        "FEISHU_DOMAIN"
        if feishu_app.is_default
        else f"the domain of Feishu app {feishu_app.name!r}"
    )
