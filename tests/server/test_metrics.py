"""`GET /metrics` of the real app (`bot.server.create_app`) after real runs: Slack through
FakeSlack, the console, the model on FakeOpenAI, the ops connector on its fake API. The scrape
is parsed with prometheus_client's own parser. Then what an attacker tries: a proxy's
forwarding headers, a rebound host name, a peer elsewhere, no or a wrong token; and nothing of
a run's people, place, arguments or secrets ever shows in a scrape.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, make_mocked_request
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

from bot.observability.metrics import OTHER, BoundedLabels, Metrics, statement_kind
from bot.server import RUNTIME_KEY, create_app, metrics
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import BOT_TOKEN, TEAM_ID, FakeSlack
from tests.feishu import e2e as feishu_e2e
from tests.server import test_healthz as healthz
from tests.server.conftest import ConsoleClient
from tests.slack.e2e import SlackBot, ops_settings, wait_card
from tests.slack.payloads import CHANNEL, SIGNING_SECRET, mention

# in the run's arguments and its request: it must never reach a scrape
DISTINCT = "zq-canary-7731"
PROMPT_TOKENS, COMPLETION_TOKENS = 100, 7
TOKEN = "metrics-token-8c1e5b0d7a"


class Scrape:
    """One parsed scrape: `value(sample, **labels)` is a sample's value (None if absent)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = [s for f in self.families.values() for s in f.samples]

    def value(self, name: str, **labels: str) -> float | None:
        found = [s.value for s in self.samples if s.name == name and s.labels == labels]
        assert len(found) <= 1, f"{name}{labels} is ambiguous"
        return found[0] if found else None


async def scrape(client: TestClient, **headers: str) -> Scrape:
    response = await client.get("/metrics", headers=headers)
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"].startswith("text/plain")
    return Scrape(await response.text())


def counted(turn: Turn) -> Turn:
    return dataclasses.replace(
        turn, prompt_tokens=PROMPT_TOKENS, completion_tokens=COMPLETION_TOKENS
    )


def restart_distinct(body: dict[str, Any]) -> Turn:
    """The model restarts the service named DISTINCT, then answers; each reply reports
    PROMPT_TOKENS and COMPLETION_TOKENS."""
    if body.get("stream"):
        return answer("Restarted.")
    if any(m["role"] == "tool" for m in body["messages"]):
        return counted(answer("restarted"))
    return counted(tool_call("ops__restart", {"name": DISTINCT}, id="call_restart"))


@pytest.fixture
def slack_settings(tmp_path, database_url, ops_api, fake_slack, fake_openai):
    return ops_settings(
        tmp_path, database_url=database_url, ops_api=ops_api, slack=fake_slack,
        llm_url=fake_openai.base_url,
    )  # fmt: skip


@pytest.fixture
async def slack_bot(aiohttp_client, slack_settings, fake_slack) -> SlackBot:
    return SlackBot(await aiohttp_client(create_app(slack_settings)), fake_slack)


@pytest.mark.both_databases
async def test_a_slack_run_shows_in_the_scrape_and_nothing_of_its_people_or_arguments(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_distinct)
    before = await scrape(slack_bot.client)
    event = mention(f"please restart {DISTINCT}", user="U0DEV")
    root = event["event"]["ts"]
    assert await slack_bot.send(event) == 200
    card = await wait_card(fake_slack, root, pending=True)

    waiting = await scrape(slack_bot.client)
    pending = {"connector": "ops", "action": "restart", "rule": "static"}
    assert waiting.value("chatops_approvals_pending", **pending) == 1
    assert waiting.value("chatops_active_runs") == 1
    assert waiting.value("chatops_leases_held") == 1
    assert waiting.value("chatops_runs_total", outcome="done") == 0

    # Slack answers the next edit (the card's, once decided) with a 429: retried, counted
    fake_slack.fail_next("chat.update", status=429, headers={"Retry-After": "0"})
    assert await slack_bot.click(card, APPROVE_ACTION, user="U0LEAD") == 200
    await slack_bot.wait_idle()
    await wait_card(fake_slack, root, pending=False)
    assert ops_api.restarts == [DISTINCT]

    after = await scrape(slack_bot.client)
    assert after.value("chatops_runs_total", outcome="done") == 1
    assert after.value("chatops_runs_total", outcome="failed") == 0
    ok = {"connector": "ops", "action": "restart"}
    assert after.value("chatops_tool_calls_total", **ok, outcome="ok") == 1
    assert after.value("chatops_tool_call_duration_seconds_count", **ok) == 1
    assert after.value("chatops_approvals_pending", **pending) == 0
    decided = {**pending, "decision": "approved"}
    assert after.value("chatops_approval_decision_seconds_count", **decided) == 1
    chats = [body for body in fake_openai.requests if not body.get("stream")]
    assert len(chats) == 2  # the tool call, then the loop's last word
    assert after.value("chatops_model_tokens_total", kind="prompt") == 2 * PROMPT_TOKENS
    assert after.value("chatops_model_tokens_total", kind="completion") == 2 * COMPLETION_TOKENS
    assert after.value("chatops_model_request_duration_seconds_count", call="chat") == 2
    assert after.value("chatops_model_request_duration_seconds_count", call="stream") == 1
    slack = {"platform": "slack"}
    posts = len(fake_slack.calls("chat.postMessage"))
    assert after.value("chatops_platform_api_calls_total", **slack, method="chat.postMessage") == (
        posts
    )
    edits = after.value("chatops_platform_api_calls_total", **slack, method="chat.update")
    assert edits == len(fake_slack.calls("chat.update")) - 1  # the 429 was retried, not re-called
    limited = after.value("chatops_platform_api_rate_limited_total", **slack, method="chat.update")
    assert limited == 1
    assert after.value("chatops_active_runs") == 0
    assert after.value("chatops_leases_held") == 0
    assert after.value("chatops_database_up") == 1
    # the run's statements: the event and the run written, its steps and call log updated
    for kind in ("select", "insert", "update"):
        was = before.value("chatops_db_statements_total", kind=kind) or 0
        assert (after.value("chatops_db_statements_total", kind=kind) or 0) > was, kind
    kinds = {s.labels["kind"] for s in after.families["chatops_db_statements"].samples}
    assert kinds == {"select", "insert", "update", "delete", "other"}  # only these, never SQL
    assert after.families["chatops_event_loop_lag_seconds"].type == "histogram"
    recent = after.families["chatops_event_loop_lag_recent_seconds"].samples
    assert {s.labels["stat"] for s in recent} == {"p50", "p99", "max"}

    # nobody's id, no channel or thread, no argument, no secret: only bounded names
    for leak in (DISTINCT, "U0DEV", "U0LEAD", CHANNEL, root, BOT_TOKEN, SIGNING_SECRET,
                 "sk-test-not-a-secret", "please restart"):  # fmt: skip
        assert leak not in after.text, leak
    labels = {k for s in after.samples for k in s.labels}
    assert labels <= {"outcome", "connector", "action", "rule", "decision", "call", "kind",
                      "platform", "method", "stat", "le", "workspace"}  # fmt: skip
    # the team shows only as the workspace of the per-workspace series (issue 35)
    teams = {s.labels["workspace"] for s in after.samples if "workspace" in s.labels}
    assert teams == {TEAM_ID}
    assert all(TEAM_ID not in v for s in after.samples for k, v in s.labels.items()
               if k != "workspace")  # fmt: skip


async def test_a_rejection_and_a_failing_model_through_the_console(
    console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    runtime = console.client.app[RUNTIME_KEY]  # type: ignore[index]
    fake_openai.respond_with(restart_distinct)
    await console.send(f"restart {DISTINCT}", user="alice-secret-user")
    card = await console.wait_item(
        lambda i: i["kind"] == "approval" and i["data"]["state"] == "pending"
    )
    assert (await scrape(console.client)).value(
        "chatops_approvals_pending", connector="ops", action="restart", rule="static"
    ) == 1
    await console.decide(card["data"]["approval_id"], "reject", user="bob", reason="not now")
    await runtime.run_manager.wait_idle(15)

    fake_openai.fail_next(500)  # the next run's first model call fails (no retries here)
    await console.send("and now?", user="alice-secret-user")
    await runtime.run_manager.wait_idle(15)

    after = await scrape(console.client)
    assert after.value("chatops_runs_total", outcome="done") == 1
    assert after.value("chatops_runs_total", outcome="failed") == 1
    call = {"connector": "ops", "action": "restart"}
    assert after.value("chatops_tool_calls_total", **call, outcome="rejected") == 1
    assert after.value("chatops_tool_call_duration_seconds_count", **call) is None  # never ran
    rejected = {**call, "rule": "static", "decision": "rejected"}
    assert after.value("chatops_approval_decision_seconds_count", **rejected) == 1
    assert after.value("chatops_approvals_pending", **call, rule="static") == 0
    assert after.value("chatops_model_errors_total", kind="server_error") == 1
    assert ops_api.restarts == []
    for leak in (DISTINCT, "alice-secret-user", "bob", "not now", "and now?"):
        assert leak not in after.text, leak


async def test_feishu_calls_and_throttled_answers_are_counted_by_operation(
    aiohttp_client, tmp_path, database_url, ops_api: OpsAPI, fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(feishu_e2e.manifest(ops_api.url))
    settings = feishu_e2e.bot_settings(
        database_url=database_url, manifests=manifests, fake=fake_feishu,
        llm_url=fake_openai.base_url,
    )  # fmt: skip
    bot = feishu_e2e.FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)
    fake_openai.respond_with(restart_distinct)
    root, card = await bot.request_restart()
    reset = {"x-ogw-ratelimit-reset": "0"}
    fake_feishu.fail_next("message.patch", status=429, headers=reset, count=2)
    fake_feishu.fail_next("message.patch", status=200, code=99991400, headers=reset)
    await bot.click(card, "approve", user=feishu_e2e.LEAD)
    await bot.wait_idle()
    await feishu_e2e.wait_card(fake_feishu, root, pending=False)

    after = await scrape(bot.client)
    feishu = {"platform": "feishu"}
    assert after.value("chatops_platform_api_rate_limited_total", **feishu, method="patch") == 3
    patches = len(fake_feishu.calls("message.patch"))
    assert after.value("chatops_platform_api_calls_total", **feishu, method="patch") == (
        patches - 3  # three answers were retried: one call each
    )
    replies = len(fake_feishu.calls("message.reply"))
    assert after.value("chatops_platform_api_calls_total", **feishu, method="reply") == replies
    assert after.value("chatops_platform_api_errors_total", **feishu, method="patch",
                       kind="rate_limited") is None  # fmt: skip
    assert after.value("chatops_runs_total", outcome="done") == 1
    for leak in (DISTINCT, root, feishu_e2e.DEV, feishu_e2e.LEAD, fake_feishu.app_secret):
        assert leak not in after.text, leak


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_scrape_while_the_database_is_away_still_answers_and_says_so(
    database_url, make_settings, aiohttp_client
) -> None:
    """The counters are what an outage needs most: the scrape answers, `database_up` is 0."""
    url = make_url(database_url)
    proxy = healthz.TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    await proxy.start()
    proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        app = create_app(make_settings(database_url=proxied))
        client = await aiohttp_client(app)
        await app[RUNTIME_KEY].recovery.wait(30)
        assert (await scrape(client)).value("chatops_database_up") == 1
        await proxy.cut()
        down = await scrape(client)
        assert down.value("chatops_database_up") == 0
        assert down.value("chatops_runs_total", outcome="failed") == 0
        assert str(url.password or "no-password-set") not in down.text
    finally:
        await proxy.close()


# --- who may scrape --------------------------------------------------------------------------


async def test_a_local_client_scrapes_but_not_through_a_proxy_nor_by_a_rebound_name(
    app_for,
) -> None:
    client = await app_for()
    assert (await client.get("/metrics")).status == 200
    assert (await client.get("/metrics", headers={"Host": "localhost:9"})).status == 200
    for headers in (
        {"X-Forwarded-For": "203.0.113.9"},
        {"Forwarded": "for=203.0.113.9"},
        {"X-Real-IP": "203.0.113.9"},
        {"X-Forwarded-Host": "metrics.example"},
        {"Host": "evil.example:8080"},  # DNS rebinding: a page elsewhere reading the scrape
    ):
        refused = await client.get("/metrics", headers=headers)
        assert refused.status == 403, headers
        assert "local clients only" in await refused.text()
    # a Bearer header is no way round it when no token is set
    forged = await client.get(
        "/metrics", headers={"X-Forwarded-For": "203.0.113.9", "Authorization": "Bearer "}
    )
    assert forged.status == 403


async def test_a_client_elsewhere_is_refused_without_a_token(make_settings) -> None:
    app = create_app(make_settings())
    refused = await metrics(_request_from(app, "203.0.113.9"))
    assert refused.status == 403
    refused = await metrics(_request_from(app, "10.0.0.5", Authorization="Bearer x"))
    assert refused.status == 403


async def test_with_a_token_every_client_presents_it(app_for, make_settings) -> None:
    client = await app_for(chatops_metrics_token=TOKEN)
    missing = await client.get("/metrics")
    assert missing.status == 401  # a local client too
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    for wrong in (f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, "Bearer "):
        refused = await client.get("/metrics", headers={"Authorization": wrong})
        assert refused.status == 401, wrong
        assert TOKEN not in await refused.text()
    good = {"Authorization": f"Bearer {TOKEN}"}
    scraped = await scrape(client, **good)
    assert TOKEN not in scraped.text
    # through a proxy, with the token: a scraper elsewhere is the point of the token
    assert (await scrape(client, **good, **{"X-Forwarded-For": "203.0.113.9"})).text
    app = create_app(make_settings(chatops_metrics_token=TOKEN))
    assert (await metrics(_request_from(app, "203.0.113.9"))).status == 401


def test_a_blank_token_opens_nothing(make_settings) -> None:
    """`CHATOPS_METRICS_TOKEN=` in a `.env` must not let `Authorization: Bearer ` in."""
    assert make_settings(chatops_metrics_token="  ").chatops_metrics_token is None


def _request_from(app: web.Application, remote: str, **headers: str) -> web.Request:
    request = make_mocked_request(
        "GET", "/metrics", headers={"Host": "localhost:8080", **headers}, app=app
    )
    return request.clone(remote=remote)


# --- labels stay bounded ---------------------------------------------------------------------


def test_label_values_past_the_bound_or_unlike_a_name_become_other() -> None:
    bound = BoundedLabels(limit=2)
    assert [bound("action", v) for v in ("restart", "status", "restart")] == [
        "restart",
        "status",
        "restart",
    ]
    assert bound("action", "delete") == OTHER  # a third value
    assert bound("connector", "ops") == "ops"  # each label has its own bound
    assert bound("rule", 'x"}\nchatops_runs_total{outcome="done"} 1e9') == OTHER
    assert bound("rule", "a" * 81) == OTHER


def test_a_statement_is_counted_by_its_first_keyword_only() -> None:
    kinds = {
        "SELECT 1": "select",
        "\n  insert INTO runs VALUES (?)": "insert",
        "UPDATE runs SET x=1": "update",
        "DELETE FROM inbox": "delete",
        "WITH t AS (SELECT 1) SELECT * FROM t": OTHER,
        "PRAGMA foreign_keys=ON": OTHER,
        "/* c */ SELECT 1": OTHER,
        "SELECTED": OTHER,
        "": OTHER,
    }
    assert {statement: statement_kind(statement) for statement in kinds} == kinds


def test_the_operations_page_lists_every_metric_once() -> None:
    """docs/operations.md's metric table names every metric a scrape shows, and no other."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    section = page.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(chatops_[a-z_]+)` \| (\w+) \|", section, flags=re.M)
    assert len(documented) == len({name for name, _ in documented})
    exposed = {
        (family.name + ("_total" if family.type == "counter" else ""), family.type)
        for family in Metrics().registry.collect()
    }
    assert set(documented) == exposed
