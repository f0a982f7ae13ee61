"""Every route answers a body that is not UTF-8, not JSON or absurd with a 4xx and a clear
message: no 500, no traceback in the log, nothing stored, dispatched or posted."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time

import pytest

from tests.edges.conftest import EdgeApp
from tests.fakes.feishu_events import signature
from tests.slack.payloads import SIGNING_SECRET

NOT_UTF8 = b'{"type": "event_callback", "text": "caf\xe9 \xff\xfe"}'


def slack_signed(body: bytes) -> dict[str, str]:
    """Slack's v0 signature over the raw bytes, as Slack computes it."""
    ts = str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": "v0=" + digest.hexdigest()}  # fmt: skip


def feishu_signed(edge_app: EdgeApp, body: bytes) -> dict[str, str]:
    ts, nonce = str(int(time.time())), "n0nce"
    sign = signature(ts, nonce, edge_app.feishu.encrypt_key, body)
    return {"Content-Type": "application/json", "X-Lark-Request-Timestamp": ts,
            "X-Lark-Request-Nonce": nonce, "X-Lark-Signature": sign}  # fmt: skip


def assert_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


@pytest.mark.parametrize("signed", [False, True])
async def test_slack_events_answer_a_non_utf8_body_with_400(
    edge_app: EdgeApp, caplog: pytest.LogCaptureFixture, signed: bool
) -> None:
    before = await edge_app.snapshot()
    headers = slack_signed(NOT_UTF8) if signed else {"Content-Type": "application/json"}
    response = await edge_app.client.post("/slack/events", data=NOT_UTF8, headers=headers)
    assert response.status == 400
    assert "not UTF-8" in (await response.json())["error"]
    assert await edge_app.snapshot() == before
    assert_no_traceback(caplog)


@pytest.mark.parametrize("signed", [False, True])
async def test_feishu_events_answer_a_non_utf8_body_with_4xx(
    edge_app: EdgeApp, caplog: pytest.LogCaptureFixture, signed: bool
) -> None:
    before = await edge_app.snapshot()
    headers = feishu_signed(edge_app, NOT_UTF8) if signed else {}
    response = await edge_app.client.post("/feishu/events", data=NOT_UTF8, headers=headers)
    assert response.status == (400 if signed else 401)
    assert (await response.json())["msg"]
    assert await edge_app.snapshot() == before
    assert_no_traceback(caplog)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (NOT_UTF8, "application/json"),
        (b"[1]", "application/json; charset=no-such-charset"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json"),
        (b'"just a string"', "application/json"),
    ],
    ids=["not-utf8", "unknown-charset", "nested-deep", "not-an-object"],
)
async def test_console_answers_a_bad_body_with_400(
    edge_app: EdgeApp, caplog: pytest.LogCaptureFixture, body: bytes, content_type: str
) -> None:
    before = await edge_app.snapshot()
    for path in ("/console/api/messages", "/console/api/approvals/some-id"):
        response = await edge_app.client.post(
            path, data=body, headers={"Content-Type": content_type}
        )
        assert response.status == 400, path
        assert "JSON" in await response.text()
    assert await edge_app.snapshot() == before
    assert_no_traceback(caplog)
