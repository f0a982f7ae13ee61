"""Issue 26, items 3 and 4, through a real `chatops serve` process (on SQLite: the masking is
the same on either backend): its log masks every secret the process knows, and a refused model
key fails the run.

The model endpoint refuses the key and its error echoes the key and another connector's token
(servers echo what they were sent): the run is failed, the thread names the host and what to
check, and neither secret is in the thread or in any line the process logs.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
from sqlalchemy import create_engine
from sqlmodel import Session, select

from bot.storage.models import Run
from tests.fakes.openai_server import FakeOpenAI, error
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.server.serve_process import SlackSender, serve_env, serving
from tests.slack.e2e import manifest, texts
from tests.slack.payloads import mention

MODEL_KEY = "sk-test-not-a-secret"  # what `serve_env` sets as OPENAI_API_KEY
BILLING_TOKEN = "billing-token-5a4b3c2d1e0f"
BILLING = """\
name: billing
description: Billing API
base_url: {url}
auth: {{type: bearer, token_env: BILLING_TOKEN}}
actions:
  - name: invoices
    description: List invoices
    method: GET
    path: /invoices
"""


def run_statuses(database_url: str) -> list[str]:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            return [run.status for run in session.exec(select(Run)).all()]
    finally:
        engine.dispose()


async def test_serve_logs_no_secret_and_fails_a_run_whose_key_is_refused(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    (manifests / "billing.yaml").write_text(BILLING.format(url=ops_api.url))
    env = serve_env(
        database_url=database_url, manifests=manifests, slack_url=fake_slack.url,
        llm_url=fake_openai.base_url, billing_token=BILLING_TOKEN,
    )  # fmt: skip
    fake_openai.script(error(401, message=f"bad key {MODEL_KEY} (sent with {BILLING_TOKEN})"))
    event = mention("how is api?", user="U0DEV")
    root = event["event"]["ts"]
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        assert await SlackSender(http).send(bot, event) == 200
        await fake_slack.wait_for(
            lambda: any("refused the key" in text for text in texts(fake_slack, root)), 30
        )
        await bot.wait_log("failed", 30)
        assert await bot.stop() == 0

    assert run_statuses(database_url) == ["failed"]
    shown = " ".join(texts(fake_slack, root))
    assert "127.0.0.1 refused the key (401): check OPENAI_API_KEY" in shown
    logged = "".join(bot.log)
    assert "401" in logged  # the failure is logged ...
    for secret in (MODEL_KEY, BILLING_TOKEN, BOT_TOKEN):  # ... with no secret in it
        assert secret not in logged and secret not in shown
