"""Per-user OAuth credentials through the web console: the connect link is a note addressed to
the person in their console thread (never in a run-event frame), the run waits and goes on once
a real browser has connected; a disconnect revokes at the provider. SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import unused_port
from cryptography.fernet import Fernet

from bot.errors import StartupError
from bot.server import RUNTIME_KEY, create_app
from tests.fakes.oauth_provider import (
    BOT_TOKEN,
    CLIENT_ID,
    CLIENT_SECRET,
    FakeOAuthProvider,
    gh_manifest,
    open_link,
)
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.serving import started
from tests.server.conftest import ConsoleClient, llm_settings

pytestmark = pytest.mark.both_databases

LINK_RE = re.compile(r"http://127\.0\.0\.1:\d+/oauth/gh/start\?link=[A-Za-z0-9_-]+")


@pytest.fixture
async def provider() -> AsyncIterator[FakeOAuthProvider]:
    async with started(FakeOAuthProvider()) as fake:
        yield fake


@pytest.fixture
def gh_dir(tmp_path: Path, provider: FakeOAuthProvider, monkeypatch) -> Path:
    monkeypatch.setenv("GH_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("GH_CLIENT_SECRET", CLIENT_SECRET)
    monkeypatch.setenv("GH_BOT_TOKEN", BOT_TOKEN)
    directory = tmp_path / "gh-manifests"
    directory.mkdir()
    (directory / "gh.yaml").write_text(gh_manifest(provider.url))
    return directory


def whoami(body: dict) -> Turn:
    if body.get("stream"):
        return answer("You are octo-dev.")
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("done")
    return tool_call("gh__whoami", {}, id="call_whoami")


async def test_console_link_run_and_disconnect(
    make_settings, database_url, gh_dir, provider, fake_openai: FakeOpenAI, aiohttp_client
):
    port = unused_port()
    provider.redirect_uri = f"http://127.0.0.1:{port}/oauth/gh/callback"
    settings = make_settings(
        database_url=database_url, chatops_manifests_dir=gh_dir, **llm_settings(fake_openai),
        chatops_credentials_key=Fernet.generate_key().decode(),
        chatops_public_url=f"http://127.0.0.1:{port}", chatops_oauth_wait_s=20.0,
    )  # fmt: skip
    client = await aiohttp_client(create_app(settings), server_kwargs={"port": port})
    console = ConsoleClient(client)
    await console.start()
    try:
        fake_openai.respond_with(whoami)
        sent = await (await console.send("who am I on gh?", user="alice")).json()
        note = await console.wait_item(
            lambda i: i["kind"] == "notice" and "oauth/gh/start" in i["data"].get("text", "")
        )
        assert note["thread"] == sent["thread"] and note["data"]["to"] == "alice"
        link = LINK_RE.search(note["data"]["text"])
        assert link is not None
        assert all(link.group(0) not in str(frame) for frame in console.frames)
        assert provider.api_calls == []

        status, page = await open_link(link.group(0))
        assert status == 200 and "Connected" in page
        await console.wait_item(lambda i: i["kind"] == "answer" and i["thread"] == sent["thread"])
        assert provider.api_calls == [("GET", "/api/user", "octo-dev")]
        waits = [(d["status"], d.get("person")) for name, d in console.frames
                 if name == "step" and d.get("type") == "credentials"]  # fmt: skip
        assert waits[:1] == [("waiting", "alice")]
        assert all(link.group(0) not in str(frame) for frame in console.frames)

        oauth = client.app[RUNTIME_KEY].oauth
        assert oauth is not None
        issued = provider.tokens_of("octo-dev")
        owner = next(iter(await _owners(client)))
        assert await oauth.disconnect("gh", owner)
        assert set(provider.revoked) == set(issued)
        assert await _owners(client) == []
    finally:
        await console.close()


async def _owners(client) -> list[str]:
    from bot.storage import credentials as queries

    runtime = client.app[RUNTIME_KEY]
    return [row.owner for row in await runtime.db.run(queries.credentials_of, None)]


async def test_an_oauth_connector_without_the_key_stops_start_up(
    make_settings, database_url, gh_dir, fake_openai: FakeOpenAI, aiohttp_client
):
    settings = make_settings(
        database_url=database_url, chatops_manifests_dir=gh_dir, **llm_settings(fake_openai)
    )
    with pytest.raises(StartupError, match="CHATOPS_CREDENTIALS_KEY"):
        await aiohttp_client(create_app(settings))


def test_a_malformed_key_stops_start_up(make_settings, gh_dir):
    settings = make_settings(chatops_manifests_dir=gh_dir, chatops_credentials_key="not-a-key")
    with pytest.raises(StartupError, match="not a Fernet key"):
        create_app(settings)
