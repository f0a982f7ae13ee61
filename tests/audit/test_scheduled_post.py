"""The weekly report posts itself: the whole app (`create_app`) with Slack on the fake Slack
Web API, the audit schedule in the settings, and the stored job made due (the test clock)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from bot.audit.schedule import AUDIT_JOB_ID, AuditSchedulerContext
from bot.config import Settings
from bot.server import create_app
from bot.storage.database import Database
from tests.audit.conftest import claimed_runs
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack


async def test_scheduled_report_posts_to_slack(
    audit_db: Database, database_url: str, fake_slack: FakeSlack, aiohttp_client
) -> None:
    settings = Settings(
        database_url=database_url,
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret="test-signing-secret",
        slack_api_url=fake_slack.url,
        chatops_audit_schedule="0 9 * * MON",
        chatops_audit_channels="slack:C_AUDIT",
    )
    app = create_app(settings)
    context = next(c for c in app.cleanup_ctx if isinstance(c, AuditSchedulerContext))
    await aiohttp_client(app)  # starts the app: runtime, surfaces, scheduler
    scheduler = context.scheduler
    scheduler.scheduler.pause()
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    scheduler.scheduler.modify_job(AUDIT_JOB_ID, next_run_time=due)
    scheduler.scheduler.resume()

    def report_posts():
        return [
            c for c in fake_slack.calls("chat.postMessage") if c.args.get("channel") == "C_AUDIT"
        ]

    posts = await fake_slack.wait_for(report_posts)
    assert len(posts) == 1
    blocks = posts[0].args["blocks"]
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    assert blocks[0]["text"]["text"] == "Audit report"
    assert posts[0].args["text"].startswith("Audit report: ")
    assert [t for t, _ in claimed_runs(audit_db, AUDIT_JOB_ID)] == [due]
