"""The console with no configuration at all, and the guards around its routes."""

from __future__ import annotations

import re

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from bot.errors import StartupError
from bot.server import RUNTIME_KEY, create_app
from bot.surfaces.console.guard import ConsoleGuard
from bot.surfaces.console.routes import LLM_BANNER, ConsoleRoutes
from bot.surfaces.console.signin import ConsoleIdentity
from bot.surfaces.console.surface import ConsoleSurface


async def test_no_llm_configured_shows_the_banner_and_refuses_requests(
    aiohttp_client, make_settings
) -> None:
    client = await aiohttp_client(create_app(make_settings()))
    page = await client.get("/")
    assert page.status == 200
    html = await page.text()
    assert "chatops console" in html
    # its script and style come from the app itself: nothing fetched from anywhere else
    links = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert "/console/static/app.js" in links and "/favicon.ico" in links
    assert all(link.startswith("/") and not link.startswith("//") for link in links)
    for link in links:
        assert (await client.get(link)).status == 200, link

    state = await (await client.get("/console/api/state")).json()
    assert state["llm_configured"] is False
    assert (
        state["banner"]
        == LLM_BANNER
        == ("LLM not configured: set OPENAI_API_KEY or OPENAI_BASE_URL")
    )
    refused = await client.post("/console/api/messages", json={"text": "restart api"})
    assert refused.status == 503
    assert (await refused.json())["error"] == LLM_BANNER
    health = await client.get("/healthz")
    assert health.status == 200
    assert (await health.json())["ok"] is True  # ("recovering" too while start-up recovers)


async def test_posts_must_be_json_and_same_origin(aiohttp_client, make_settings) -> None:
    client = await aiohttp_client(create_app(make_settings()))
    form = await client.post("/console/api/messages", data={"text": "restart api"})
    assert form.status == 415
    cross = await client.post(
        "/console/api/approvals/abc",
        json={"decision": "approve"},
        headers={"Origin": "http://evil.example"},
    )
    assert cross.status == 403
    rebound = await client.get("/console/api/state", headers={"Host": "evil.example:8080"})
    assert rebound.status == 403
    named = await client.get("/console/api/state", headers={"Host": "localhost:8080"})
    assert named.status == 200
    same = await client.post(
        "/console/api/approvals/abc",
        json={"decision": "approve"},
        headers={"Origin": f"http://{client.host}:{client.port}"},
    )
    assert same.status == 404  # passed the guard; the approval does not exist


def _request_from(app: web.Application, remote: str, headers: dict | None = None) -> web.Request:
    request = make_mocked_request(
        "GET",
        "/console/api/state",
        headers={"Host": "localhost:8080", **(headers or {})},
        app=app,
    )
    return request.clone(remote=remote)


async def test_console_answers_loopback_clients_only_unless_public(
    aiohttp_client, make_settings
) -> None:
    client = await aiohttp_client(create_app(make_settings()))
    app = client.app
    assert app is not None
    runtime = app[RUNTIME_KEY]
    routes = ConsoleRoutes(
        runtime.surface_ports(), runtime.settings, ConsoleSurface(runtime.console_ports().items)
    )
    state = ConsoleGuard(runtime.settings, ConsoleIdentity(runtime.settings)).api(routes.state)
    for remote in ("127.0.0.1", "::1"):
        assert (await state(_request_from(app, remote))).status == 200
    for remote in ("10.0.0.7", "192.168.1.20", "2001:db8::1", ""):
        try:
            await state(_request_from(app, remote))
        except web.HTTPForbidden as refused:
            assert "CHATOPS_CONSOLE_PUBLIC" in refused.text
        else:
            raise AssertionError(f"{remote!r} reached the console")


async def test_public_console_answers_remote_clients_with_the_token(
    aiohttp_client, make_settings
) -> None:
    settings = make_settings(chatops_console_public=True, chatops_console_token="t0ken-xyz")
    client = await aiohttp_client(create_app(settings))
    app = client.app
    assert app is not None
    routes = ConsoleRoutes(
        app[RUNTIME_KEY].surface_ports(),
        settings,
        ConsoleSurface(app[RUNTIME_KEY].console_ports().items),
    )
    state = ConsoleGuard(settings, ConsoleIdentity(settings)).api(routes.state)
    bearer = {"Authorization": "Bearer t0ken-xyz", "X-Forwarded-For": "10.0.0.7"}
    response = await state(_request_from(app, "10.0.0.7", bearer))
    assert response.status == 200
    try:
        await state(_request_from(app, "10.0.0.7"))
    except web.HTTPUnauthorized as refused:
        assert "needs its token" in refused.text
    else:
        raise AssertionError("a request without the token reached a public console")


def test_the_page_scripts_parse() -> None:
    """A syntax error in any of the page's modules blanks the whole console (esprima parses
    each as a browser would load it: a module)."""
    import esprima

    from tests.server.console_page import SCRIPTS, script

    for name in SCRIPTS:
        assert esprima.parseModule(script(name)).body, name


def test_a_blank_token_is_no_token(make_settings) -> None:
    """`CHATOPS_CONSOLE_TOKEN=` (set, but blank) must not open a public console to everyone
    who sends `Authorization: Bearer ` with nothing after it: it starts not at all."""
    for blank in ("", "   "):
        settings = make_settings(chatops_console_public=True, chatops_console_token=blank)
        assert settings.chatops_console_token is None
        try:
            create_app(settings)
        except StartupError as refused:
            assert "CHATOPS_CONSOLE_TOKEN" in str(refused)
        else:
            raise AssertionError("a public console started with a blank token")
