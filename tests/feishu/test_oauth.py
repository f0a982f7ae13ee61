"""Per-user OAuth credentials on Feishu, end to end: the real app, encrypted and signed pushes,
FakeFeishu, the fake model, and a fake OAuth provider whose API records whose token each
request carried.

A person who has not connected gets the connect link on a card only they see: Feishu's
ephemeral card in the group chat (`ephemeral/v1/send`), never a message in the thread; in a
direct chat a card to that chat; should Feishu refuse the ephemeral card, a direct message.
The run waits, its status card saying so, and goes on once a real browser (cookie jar,
redirects) has gone through the bot's start route, the provider and the bot's callback, with
that person's token. A second person in the same chat never sees the first one's link and
never acts with their token. SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import unused_port
from cryptography.fernet import Fernet
from sqlalchemy import create_engine, text

from bot.server import create_app
from tests.fakes.feishu_api import NOT_A_MEMBER, FakeFeishu
from tests.fakes.oauth_provider import BOT_TOKEN as GH_BOT_TOKEN
from tests.fakes.oauth_provider import CLIENT_ID, CLIENT_SECRET, FakeOAuthProvider, gh_manifest
from tests.fakes.oauth_provider import open_link as follow
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.serving import started
from tests.feishu.e2e import DEV, FeishuBot, bot_settings, status_message

pytestmark = pytest.mark.both_databases

KEY = Fernet.generate_key().decode()
LINK_RE = re.compile(r"http://127\.0\.0\.1:\d+/oauth/gh/start\?link=[A-Za-z0-9_-]+")
GROUP = "oc_group"
OTHER = "ou_other"


@pytest.fixture
async def provider() -> AsyncIterator[FakeOAuthProvider]:
    async with started(FakeOAuthProvider()) as fake:
        yield fake


@pytest.fixture
def port() -> int:
    return unused_port()


@pytest.fixture
def settings(tmp_path: Path, database_url: str, provider, fake_feishu, fake_openai, port,
             monkeypatch):  # fmt: skip
    monkeypatch.setenv("GH_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("GH_CLIENT_SECRET", CLIENT_SECRET)
    monkeypatch.setenv("GH_BOT_TOKEN", GH_BOT_TOKEN)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "gh.yaml").write_text(gh_manifest(provider.url))
    provider.redirect_uri = f"http://127.0.0.1:{port}/oauth/gh/callback"
    return bot_settings(
        database_url=database_url, manifests=manifests, fake=fake_feishu,
        llm_url=fake_openai.base_url, chatops_credentials_key=KEY,
        chatops_public_url=f"http://127.0.0.1:{port}", chatops_oauth_wait_s=20.0,
    )  # fmt: skip


@pytest.fixture
async def bot(aiohttp_client, settings, fake_feishu, port) -> FeishuBot:
    app = create_app(settings)
    return FeishuBot(await aiohttp_client(app, server_kwargs={"port": port}), fake_feishu)


def whoami_then_answer(body: dict[str, Any]) -> Turn:
    if body.get("stream"):
        return answer("Done.")
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("done")
    return tool_call("gh__whoami", {}, id="call_gh__whoami")


def rows(database_url: str, sql: str) -> list[Any]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)))
    finally:
        engine.dispose()


def public(fake: FeishuBot | FakeFeishu) -> str:
    """Everything posted where others can see it: messages, replies and edits, as sent."""
    assert isinstance(fake, FakeFeishu)
    ops = ("message.create", "message.reply", "message.patch")
    return json.dumps([c.body for op in ops for c in fake.calls(op)])


def link_in(card: dict[str, Any]) -> str:
    found = LINK_RE.search(json.dumps(card))
    assert found is not None, card
    return found.group(0)


async def test_link_on_an_ephemeral_card_then_the_run_goes_on_with_the_persons_token(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, provider, database_url
):
    fake_feishu.join(GROUP, OTHER)  # someone else is in the chat too
    fake_openai.respond_with(whoami_then_answer)
    event = fake_feishu.message_event("who am I on gh?", user=DEV, chat_id=GROUP)
    root = event["event"]["message"]["message_id"]
    await bot.send(event)

    note = await fake_feishu.wait_for(lambda f: next(iter(f.ephemeral_to(DEV)), None), 15)
    assert note.chat_id == GROUP
    [sent] = fake_feishu.calls("ephemeral.send")
    assert sent.body["open_id"] == DEV and sent.body["msg_type"] == "interactive"
    link = link_in(note.card)
    assert fake_feishu.ephemeral_to(OTHER) == []
    await fake_feishu.wait_for(
        lambda f: "Waiting for ou_dev to connect gh" in json.dumps(status_message(f, root).content),
        15,
    )
    assert link not in public(fake_feishu)  # not in the thread, not as a DM: DEV's alone
    assert provider.api_calls == []  # the run waits

    status, page = await follow(link)
    assert status == 200 and "Connected" in page
    await bot.wait_idle()
    assert provider.api_calls == [("GET", "/api/user", "octo-dev")]

    owner = f"feishu:{fake_feishu.tenant_key}:{DEV}"
    logged = rows(database_url, "SELECT credential_owner, result_status FROM call_log")
    assert [tuple(r) for r in logged] == [(owner, "ok")]
    stored = rows(database_url, "SELECT owner, secret FROM user_credential")
    assert [r[0] for r in stored] == [owner]
    seen = json.dumps([c.body for c in fake_feishu.requests], default=str)
    for token in provider.tokens_of("octo-dev"):  # encrypted at rest, shown nowhere
        assert token not in stored[0][1] and token not in seen
        assert token not in json.dumps(fake_openai.requests)
    assert link not in json.dumps(fake_openai.requests)


async def test_a_second_person_in_the_chat_gets_only_their_own_link_and_token(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, provider, database_url
):
    fake_openai.respond_with(whoami_then_answer)
    await bot.send(fake_feishu.message_event("who am I?", user=DEV, chat_id=GROUP))
    dev_note = await fake_feishu.wait_for(lambda f: next(iter(f.ephemeral_to(DEV)), None), 15)
    dev_link = link_in(dev_note.card)
    assert (await follow(dev_link))[0] == 200
    await bot.wait_idle()

    # OTHER asks in the same chat: DEV being connected does not make OTHER act as DEV
    await bot.send(fake_feishu.message_event("and me?", user=OTHER, chat_id=GROUP))
    other_note = await fake_feishu.wait_for(lambda f: next(iter(f.ephemeral_to(OTHER)), None), 15)
    other_link = link_in(other_note.card)
    assert other_link != dev_link
    assert dev_link not in json.dumps(other_note.card)
    assert [e.user for e in fake_feishu.ephemeral] == [DEV, OTHER]  # one card each, no more
    assert provider.api_calls == [("GET", "/api/user", "octo-dev")]  # OTHER's call waits

    provider.login = "octo-other"
    assert (await follow(other_link))[0] == 200
    await bot.wait_idle()
    assert provider.api_calls[-1] == ("GET", "/api/user", "octo-other")
    owners = {r[0] for r in rows(database_url, "SELECT credential_owner FROM call_log")}
    tenant = fake_feishu.tenant_key
    assert owners == {f"feishu:{tenant}:{DEV}", f"feishu:{tenant}:{OTHER}"}
    # DEV's link was used once and cannot be replayed for OTHER either
    status, page = await follow(dev_link)
    assert status == 400 and "used or has expired" in page


async def test_refused_ephemeral_card_goes_to_the_person_as_a_direct_message(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, provider
):
    """Feishu refuses the ephemeral card (a topic group, membership it does not see): the link
    still reaches that person alone, in a direct message, and the run still goes on."""
    fake_feishu.fail_next("ephemeral.send", status=200, code=NOT_A_MEMBER, msg="not in chat")
    fake_openai.respond_with(whoami_then_answer)
    event = fake_feishu.message_event("who am I?", user=DEV, chat_id=GROUP)
    root = event["event"]["message"]["message_id"]
    await bot.send(event)

    def direct(f: FakeFeishu) -> Any:
        sent = [c for c in f.calls("message.create") if c.query["receive_id_type"] == "open_id"]
        return sent[0] if sent else None

    dm = await fake_feishu.wait_for(direct, 15)
    assert dm.body["receive_id"] == DEV and dm.body["msg_type"] == "interactive"
    link = link_in(json.loads(dm.body["content"]))
    assert fake_feishu.ephemeral == []
    assert link not in json.dumps([c.body for c in fake_feishu.calls("message.reply")])
    assert link not in json.dumps([m.contents for m in fake_feishu.replies_to(root)])
    assert (await follow(link))[0] == 200
    await bot.wait_idle()
    assert provider.api_calls == [("GET", "/api/user", "octo-dev")]


async def test_in_a_direct_chat_the_link_is_a_card_to_that_chat(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, provider
):
    fake_openai.respond_with(whoami_then_answer)
    await bot.send(
        fake_feishu.message_event("who am I?", user=DEV, chat_id="oc_dm", chat_type="p2p")
    )

    def to_chat(f: FakeFeishu) -> Any:
        sent = [c for c in f.calls("message.create") if c.body.get("receive_id") == "oc_dm"]
        return sent[0] if sent else None

    card = await fake_feishu.wait_for(to_chat, 15)
    assert card.query["receive_id_type"] == "chat_id" and card.body["msg_type"] == "interactive"
    assert fake_feishu.calls("ephemeral.send") == []  # a p2p chat is private already
    assert (await follow(link_in(json.loads(card.body["content"]))))[0] == 200
    await bot.wait_idle()
    assert provider.api_calls == [("GET", "/api/user", "octo-dev")]
