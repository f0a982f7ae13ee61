"""Who a public console's user is: signed in with OpenID Connect (a fake provider on
127.0.0.1 that checks what a real one does), or named by a trusted auth proxy. The page's
"you are" name is never believed there, so approver lists and four-eyes hold for console
approvals; and what an attacker tries: a forged or foreign session cookie, a sign-in this
browser did not start, an ID token for another client, with another nonce, expired, or signed
by a key the provider never published, a user header from outside the proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from cryptography.fernet import Fernet

from bot.cli import main
from bot.config import Settings
from bot.server import create_app
from bot.storage.models import Run
from bot.surfaces.console.sessions import SessionCookies
from tests.fakes.oidc_provider import CLIENT_ID, CLIENT_SECRET, FakeOidcProvider
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI, ops_manifest
from tests.security.conftest import finishing
from tests.server.conftest import ConsoleClient, llm_settings
from tests.server.serve_process import free_port

LEAD, ALICE = "lead@example.com", "alice@example.com"
SESSION_SECRET = "session-secret-for-the-tests-0b7c"


@pytest.fixture
def lead_manifests(tmp_path: Path, ops_api: OpsAPI) -> Path:
    """`restart` needs the approval of LEAD (the ID token's email, or the proxy's header)."""
    directory = tmp_path / "manifests"
    directory.mkdir()
    (directory / "ops.yaml").write_text(ops_manifest(ops_api.url, approvers=(LEAD,)))
    return directory


@pytest.fixture
async def provider() -> AsyncIterator[FakeOidcProvider]:
    idp = FakeOidcProvider()
    await idp.start()
    yield idp
    await idp.close()


def settings_for(database_url: str, manifests: Path, llm: FakeOpenAI, **extra: Any) -> Settings:
    return Settings(
        _env_file=None, database_url=database_url, chatops_manifests_dir=manifests,
        chatops_console_public=True, **llm_settings(llm), **extra,
    )  # fmt: skip


@pytest.fixture
async def oidc_console(
    database_url, lead_manifests, fake_openai, provider: FakeOidcProvider, aiohttp_client
) -> TestClient:
    """A public console signing people in at `provider`, on a port chosen first: its public
    URL (and so its registered redirect URI) names it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    provider.redirect_uri = f"{url}/console/signin/callback"
    settings = settings_for(
        database_url, lead_manifests, fake_openai,
        chatops_console_oidc_issuer=provider.issuer, chatops_console_oidc_client_id=CLIENT_ID,
        chatops_console_oidc_client_secret=CLIENT_SECRET,
        chatops_console_session_secret=SESSION_SECRET, chatops_console_url=url,
    )  # fmt: skip
    return await aiohttp_client(create_app(settings), server_kwargs={"port": port})


async def sign_in(
    client: TestClient, provider: FakeOidcProvider, user: str
) -> aiohttp.ClientResponse:
    """The browser's round trip: the console, the provider, back to the console's callback."""
    provider.user = user
    started = await client.get("/console/signin", allow_redirects=False)
    assert started.status == 302, await started.text()
    async with aiohttp.ClientSession() as browser:
        at_provider = await browser.get(started.headers["Location"], allow_redirects=False)
        assert at_provider.status == 302, await at_provider.text()
        back = urlsplit(at_provider.headers["Location"])
    return await client.get(f"{back.path}?{back.query}", allow_redirects=False)


def second_browser(client: TestClient) -> aiohttp.ClientSession:
    """Another person's browser on the same console: its own cookie jar."""
    base = str(client.make_url("/")).rstrip("/")
    return aiohttp.ClientSession(base_url=base, cookie_jar=aiohttp.CookieJar(unsafe=True))


async def test_people_sign_in_and_approvals_hold_for_who_they_are(
    oidc_console: TestClient, provider: FakeOidcProvider, fake_openai: FakeOpenAI,
    ops_api: OpsAPI, db_rows,
) -> None:  # fmt: skip
    refused = await oidc_console.get("/console/api/state")
    assert refused.status == 401
    assert (await refused.json())["signin"] == "/console/signin"
    back = await sign_in(oidc_console, provider, ALICE)
    assert back.status == 302 and back.headers["Location"] == "/"
    cookie = back.cookies["chatops_session"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert ALICE not in cookie.value  # sealed, not merely signed
    # the authorization code flow with PKCE, as the provider saw it
    [asked] = provider.authorize_requests
    assert asked["code_challenge_method"] == "S256" and asked["nonce"] and asked["state"]
    [exchanged] = provider.token_requests
    assert exchanged["code_verifier"] and "client_secret" not in exchanged  # Basic auth
    state = await (await oidc_console.get("/console/api/state")).json()
    assert state["identity"] == {"user": ALICE, "verified": True, "mode": "oidc"}

    fake_openai.script(*finishing(tool_call("ops__restart", {"name": "api"})))
    alice = ConsoleClient(oidc_console)
    await alice.start()
    lead_browser = second_browser(oidc_console)
    try:
        assert (await alice.send("restart api", user=LEAD)).status == 202  # the name is ignored
        card = await alice.wait_item(
            lambda i: i["kind"] == "approval" and i["data"]["state"] == "pending"
        )
        approval_id = card["data"]["approval_id"]
        [run] = db_rows(Run)
        assert run.requester == ALICE
        # alice is no approver, whoever the page says she is
        self_approved = await alice.decide(approval_id, "approve", user=LEAD)
        assert self_approved.status == 403
        assert ops_api.restarts == []
        await sign_in(lead_browser, provider, LEAD)
        lead = ConsoleClient(lead_browser)
        assert (await lead.decide(approval_id, "approve", user=ALICE)).status == 200
        await alice.wait_item(lambda i: i["kind"] == "answer")
        assert ops_api.restarts == ["api"]
    finally:
        await alice.close()
        await lead_browser.close()


async def test_forged_and_foreign_sessions_are_refused(
    oidc_console: TestClient, provider: FakeOidcProvider
) -> None:
    foreign = SessionCookies("another-deployment's-secret", name="chatops_session",
                             max_age_s=3600, secure=False)  # fmt: skip
    forged_values = [
        "not-a-session",
        Fernet(Fernet.generate_key()).encrypt(b'{"user": "lead@example.com"}').decode(),
        foreign._fernet.encrypt(b'{"user": "lead@example.com"}').decode(),
    ]
    for value in forged_values:
        oidc_console.session.cookie_jar.update_cookies({"chatops_session": value})
        assert (await oidc_console.get("/console/api/state")).status == 401, value
    await sign_in(oidc_console, provider, LEAD)
    assert (await oidc_console.get("/console/api/state")).status == 200
    signed_out = await oidc_console.post("/console/signout", json={})
    assert signed_out.status == 200
    assert (await oidc_console.get("/console/api/state")).status == 401


async def test_a_sign_in_this_browser_did_not_start_is_refused(
    oidc_console: TestClient, provider: FakeOidcProvider
) -> None:
    """Login CSRF: an attacker's own code and state, sent to the victim's browser."""
    attacker = second_browser(oidc_console)
    try:
        provider.user = "mallory@example.com"
        started = await attacker.get("/console/signin", allow_redirects=False)
        async with aiohttp.ClientSession() as browser:
            at_provider = await browser.get(started.headers["Location"], allow_redirects=False)
        back = urlsplit(at_provider.headers["Location"])
    finally:
        await attacker.close()
    planted = await oidc_console.get(f"{back.path}?{back.query}", allow_redirects=False)
    assert planted.status == 401 and "not started here" in await planted.text()
    assert (await oidc_console.get("/console/api/state")).status == 401


@pytest.mark.parametrize(
    ("lie", "reason"),
    [
        ({"aud": "another-client"}, "aud"),
        ({"nonce": "a-replayed-nonce"}, "nonce"),
        ({"exp": 1_000_000_000}, "expired"),
        ({"iss": "https://evil.example"}, "iss"),
        ({"key": "other"}, "signature"),
        ({"email": ""}, "email"),
    ],
)
async def test_an_id_token_that_does_not_hold_signs_nobody_in(
    oidc_console: TestClient, provider: FakeOidcProvider, lie: dict[str, Any], reason: str
) -> None:
    provider.misbehave = lie
    back = await sign_in(oidc_console, provider, LEAD)
    assert back.status == 401
    said = await back.text()
    assert reason in said and "Sign-in failed" in said
    assert "chatops_session" not in back.cookies
    assert (await oidc_console.get("/console/api/state")).status == 401


async def test_a_trusted_proxy_names_the_user_and_nobody_else_can(
    database_url, lead_manifests, fake_openai: FakeOpenAI, ops_api: OpsAPI, aiohttp_client,
    db_rows,
) -> None:  # fmt: skip
    settings = settings_for(
        database_url, lead_manifests, fake_openai,
        chatops_console_proxy_user_header="X-Forwarded-User",
        chatops_console_trusted_proxies="127.0.0.1/32, ::1",
    )  # fmt: skip
    client: TestClient = await aiohttp_client(create_app(settings))
    assert (await client.get("/console/api/state")).status == 401  # the proxy named nobody
    named = {"X-Forwarded-User": ALICE}
    state = await (await client.get("/console/api/state", headers=named)).json()
    assert state["identity"] == {"user": ALICE, "verified": True, "mode": "proxy"}
    fake_openai.script(*finishing(tool_call("ops__restart", {"name": "api"})))
    alice = ConsoleClient(client, headers=named)
    await alice.start()
    try:
        assert (await alice.send("restart api", user=LEAD)).status == 202
        card = await alice.wait_item(
            lambda i: i["kind"] == "approval" and i["data"]["state"] == "pending"
        )
        assert (await alice.decide(card["data"]["approval_id"], "approve", user=LEAD)).status == 403
        lead = ConsoleClient(client, headers={"X-Forwarded-User": LEAD})
        assert (await lead.decide(card["data"]["approval_id"], "approve")).status == 200
        await alice.wait_item(lambda i: i["kind"] == "answer")
    finally:
        await alice.close()
    assert [r.requester for r in db_rows(Run)] == [ALICE]
    assert ops_api.restarts == ["api"]


async def test_a_user_header_from_outside_the_proxy_is_refused(
    database_url, lead_manifests, fake_openai: FakeOpenAI, aiohttp_client
) -> None:
    settings = settings_for(
        database_url, lead_manifests, fake_openai,
        chatops_console_proxy_user_header="X-Forwarded-User",
        chatops_console_trusted_proxies="10.0.0.0/8",  # the proxy is elsewhere, not this client
    )  # fmt: skip
    client: TestClient = await aiohttp_client(create_app(settings))
    spoofed = await client.get("/console/api/state", headers={"X-Forwarded-User": LEAD})
    assert spoofed.status == 403 and "auth proxy only" in await spoofed.text()
    decided = await client.post(
        "/console/api/approvals/x", json={"decision": "approve", "user": LEAD},
        headers={"X-Forwarded-User": LEAD},
    )  # fmt: skip
    assert decided.status == 403
    assert (await client.get("/console/api/state")).status == 401


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"CHATOPS_CONSOLE_OIDC_ISSUER": "https://id.example.com"},
            "CHATOPS_CONSOLE_OIDC_CLIENT_ID",
        ),
        (
            {"CHATOPS_CONSOLE_PROXY_USER_HEADER": "X-Forwarded-User"},
            "CHATOPS_CONSOLE_TRUSTED_PROXIES",
        ),
        (
            {
                "CHATOPS_CONSOLE_PROXY_USER_HEADER": "X-User",
                "CHATOPS_CONSOLE_TRUSTED_PROXIES": "proxy",
            },
            "not an address",
        ),
    ],
)
def test_a_half_configured_sign_in_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    env: dict[str, str], said: str,
) -> None:  # fmt: skip
    monkeypatch.setenv("CHATOPS_CONSOLE_PUBLIC", "true")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--host", "127.0.0.1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
