"""`POST /feishu/events` end to end: our checks decide, lark-oapi gets verified plaintext only,
nothing malformed is a 500, and no secret reaches a response or the log."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import aiohttp
import pytest
from lark_oapi.core.model import RawRequest, RawResponse

from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.feishu_events import encrypt, signature
from tests.feishu.conftest import SurfaceRig
from tests.feishu.test_verify import raw_cipher


def signed_headers(key: str, body: bytes, *, sent_at: float | None = None) -> dict[str, str]:
    ts, nonce = str(int(time.time() if sent_at is None else sent_at)), "n-1"
    return {
        "Content-Type": "application/json",
        "X-Lark-Request-Timestamp": ts,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": signature(ts, nonce, key, body),
    }


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.post(url, data=body, headers=headers) as r:
        text = await r.text()
        return r.status, json.loads(text)


def record_sdk_requests(rig: SurfaceRig, monkeypatch: pytest.MonkeyPatch) -> list[RawRequest]:
    """Every request the route hands lark-oapi's dispatcher (which then runs as usual)."""
    seen: list[RawRequest] = []
    real_do = rig.surface.dispatcher.do

    def do(raw: RawRequest) -> RawResponse:
        seen.append(raw)
        return real_do(raw)

    monkeypatch.setattr(rig.surface.dispatcher, "do", do)
    return seen


async def test_sdk_gets_the_verified_plaintext_and_no_signature_headers(
    rig: SurfaceRig, fake_feishu: FakeFeishu, monkeypatch: pytest.MonkeyPatch
):
    seen = record_sdk_requests(rig, monkeypatch)
    event = fake_feishu.message_event("restart api", user="ou_dev")
    status, body = await fake_feishu.push(rig.url, event)
    assert (status, body) == (200, {"msg": "success"})
    await rig.run_manager.wait_for(lambda: len(rig.run_manager.messages) == 1)
    assert rig.run_manager.messages[0].text == "restart api"
    [raw] = seen
    assert json.loads(raw.body) == event  # decrypted by us: no "encrypt" left for the SDK
    assert not any(h.lower().startswith("x-lark") for h in raw.headers)


async def test_refused_pushes_never_reach_the_sdk(
    rig: SurfaceRig, fake_feishu: FakeFeishu, monkeypatch: pytest.MonkeyPatch
):
    seen = record_sdk_requests(rig, monkeypatch)
    event = fake_feishu.message_event("restart api")
    forged = fake_feishu.message_event("x")
    forged["header"]["token"] = "forged"
    outcomes = [
        await fake_feishu.push(rig.url, event, headers={"X-Lark-Signature": "0" * 64}),
        await fake_feishu.push(rig.url, event, key="another-key"),
        await fake_feishu.push(rig.url, event, sent_at=time.time() - 3600),
        await fake_feishu.push(rig.url, forged),
        await fake_feishu.push(rig.url, fake_feishu.url_verification()),  # answered by us
    ]
    assert [s for s, _ in outcomes] == [401, 401, 401, 401, 200]
    assert [b["msg"] for _, b in outcomes[:4]] == [
        "signature verification failed",
        "signature verification failed",
        outcomes[2][1]["msg"],
        "invalid verification token",
    ]
    assert "too old" in outcomes[2][1]["msg"]
    assert seen == [] and rig.run_manager.messages == []


@pytest.mark.parametrize(
    ("plain", "message"),
    [
        (None, "base64"),
        (b"\xff" * 15 + b"\x01", "not UTF-8"),
        (b"a" * 15 + b"\x00", "padding"),
        (b"not json" + b"\x08" * 8, "not JSON"),
        (b'"a string"' + b"\x06" * 6, "not a JSON object"),
    ],
    ids=["base64", "utf8", "padding", "json", "not-object"],
)
async def test_malformed_encrypted_bodies_are_400_when_signed_and_401_unsigned(
    rig: SurfaceRig,
    fake_feishu: FakeFeishu,
    caplog: pytest.LogCaptureFixture,
    plain: bytes | None,
    message: str,
):
    encrypted = "%%%" if plain is None else raw_cipher(plain, fake_feishu.encrypt_key)
    body = json.dumps({"encrypt": encrypted}).encode()
    status, answer = await post(rig.url, body, signed_headers(fake_feishu.encrypt_key, body))
    assert status == 400 and message in answer["msg"]
    status, answer = await post(rig.url, body, {"Content-Type": "application/json"})
    assert status == 401 and "not signed" in answer["msg"]
    assert rig.run_manager.messages == [] and rig.broker.calls == []
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_verified_events_the_sdk_could_not_parse_are_400_not_500(
    rig: SurfaceRig, fake_feishu: FakeFeishu, caplog: pytest.LogCaptureFixture
):
    bad_schema = fake_feishu.message_event("x") | {"schema": 2}
    status, body = await fake_feishu.push(rig.url, bad_schema)
    assert status == 400 and "schema" in body["msg"]
    nested = fake_feishu.message_event("x") | {"encrypt": encrypt(fake_feishu.encrypt_key, "{}")}
    wrong_shape = fake_feishu.message_event("x")
    wrong_shape["event"]["sender"] = "ou_someone"
    for payload in (nested, wrong_shape):
        status, body = await fake_feishu.push(rig.url, payload)
        assert status == 400 and body == {"msg": "malformed event"}
    assert rig.run_manager.messages == []
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_older_schema_event_is_checked_by_its_top_level_token(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    v1 = {"uuid": "u-1", "ts": "1", "type": "event_callback",
          "token": fake_feishu.verification_token, "event": {"type": "message"}}  # fmt: skip
    status, body = await fake_feishu.push(rig.url, v1)
    assert (status, body) == (200, {"msg": "ignored"})
    status, body = await fake_feishu.push(rig.url, v1 | {"token": "wrong"})
    assert (status, body["msg"]) == (401, "invalid verification token")


async def test_no_secret_in_any_response_or_log_line(
    rig: SurfaceRig, fake_feishu: FakeFeishu, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    secrets = (fake_feishu.encrypt_key, fake_feishu.verification_token, fake_feishu.app_secret)
    event = fake_feishu.message_event("restart api")
    forged = fake_feishu.message_event("x")
    forged["header"]["token"] = fake_feishu.verification_token[:-1]
    garbage = json.dumps({"encrypt": raw_cipher(b"\xff" * 16, fake_feishu.encrypt_key)}).encode()
    answers = [
        await fake_feishu.push(rig.url, event),
        await fake_feishu.push(rig.url, event, headers={"X-Lark-Signature": "0" * 64}),
        await fake_feishu.push(rig.url, event, key="another-key"),
        await fake_feishu.push(rig.url, event, sent_at=0),
        await fake_feishu.push(rig.url, forged),
        await fake_feishu.push(rig.url, fake_feishu.url_verification() | {"token": "x"}),
        await post(rig.url, garbage, signed_headers(fake_feishu.encrypt_key, garbage)),
        await post(rig.url, garbage, {}),
    ]
    assert [s for s, _ in answers] == [200, 401, 401, 401, 401, 401, 400, 401]
    await rig.surface.wait_idle(10)
    text = json.dumps([b for _, b in answers]) + caplog.text
    assert "feishu push refused" in caplog.text  # the refusals are logged, without secrets
    for secret in secrets:
        assert secret not in text
