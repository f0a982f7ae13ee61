"""verify.py against Feishu's documented algorithms: the docs' own test vector, and pushes built
by the fake platform (pycryptodome, not our code) checked with an injected clock."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import pytest
from Crypto.Cipher import AES

from bot.surfaces.feishu.verify import (
    MAX_REQUEST_AGE_S,
    Challenge,
    MalformedPush,
    Refusal,
    Verified,
    WebhookVerifier,
    decrypt,
    timestamp_fresh,
    token_of,
)
from tests.fakes.feishu_events import encrypt, signature

KEY, TOKEN, NOW = "an-encrypt-key", "a-verification-token", 1_700_000_000


def headers(body: bytes, *, ts: int = NOW, nonce: str = "n0nce", key: str = KEY) -> dict[str, str]:
    return {
        "X-Lark-Request-Timestamp": str(ts),
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": signature(str(ts), nonce, key, body),
    }


def push(payload: object, *, key: str = KEY) -> bytes:
    return json.dumps({"encrypt": encrypt(key, json.dumps(payload))}).encode()


def event(token: str = TOKEN, kind: str = "im.message.receive_v1") -> dict[str, object]:
    return {"schema": "2.0", "header": {"token": token, "event_type": kind}, "event": {}}


def raw_cipher(plain: bytes, key: str = KEY) -> str:
    """AES-CBC of bytes already padded (or not) as the test wants, IV first, base64."""
    iv = os.urandom(16)
    cipher = AES.new(hashlib.sha256(key.encode()).digest(), AES.MODE_CBC, iv)
    return base64.b64encode(iv + cipher.encrypt(plain)).decode()


@pytest.fixture
def verifier() -> WebhookVerifier:
    return WebhookVerifier(KEY, TOKEN, clock=lambda: NOW)


def test_decrypt_matches_the_vector_in_feishu_docs():
    """Feishu's guide decrypts this with the key "test key" to "hello world"."""
    assert decrypt("P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=", "test key") == b"hello world"
    with pytest.raises(MalformedPush):
        decrypt("P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=", "another key")


@pytest.mark.parametrize(
    ("encrypted", "why"),
    [
        ("not base64!", "base64"),
        (base64.b64encode(b"x" * 20).decode(), "length"),
        (base64.b64encode(b"x" * 16).decode(), "length"),  # an IV and nothing else
        (raw_cipher(b"a" * 15 + b"\x00"), "padding"),
        (raw_cipher(b"a" * 14 + b"\x01\x02"), "padding"),
    ],
    ids=["not-base64", "short", "iv-only", "zero-padding", "mixed-padding"],
)
def test_decrypt_names_what_is_wrong(encrypted: str, why: str):
    with pytest.raises(MalformedPush, match=why):
        decrypt(encrypted, KEY)


def test_signed_encrypted_event_is_verified(verifier: WebhookVerifier):
    body = push(event())
    verdict = verifier.verify(body, headers(body))
    assert isinstance(verdict, Verified)
    assert verdict.payload == event() and json.loads(verdict.plaintext) == event()
    assert verdict.event_type == "im.message.receive_v1"


def test_signature_over_another_body_key_timestamp_or_nonce_is_refused(verifier: WebhookVerifier):
    body = push(event())
    for sent in (
        headers(push(event())),  # signed over another body
        headers(body, key="another-key"),
        {**headers(body), "X-Lark-Request-Timestamp": str(NOW + 1)},
        {**headers(body), "X-Lark-Request-Nonce": "other"},
        {**headers(body), "X-Lark-Signature": "\udcff" * 64},  # not encodable: a mismatch
    ):
        assert verifier.verify(body, sent) == Refusal(401, "signature verification failed")


@pytest.mark.parametrize("age_s", [MAX_REQUEST_AGE_S + 1, -MAX_REQUEST_AGE_S - 1, 86_400])
def test_a_stale_or_future_timestamp_is_refused_even_when_signed(
    verifier: WebhookVerifier, age_s: int
):
    body = push(event())
    verdict = verifier.verify(body, headers(body, ts=NOW - age_s))
    assert isinstance(verdict, Refusal) and verdict.status == 401 and "too old" in verdict.message
    fresh = verifier.verify(body, headers(body, ts=NOW - MAX_REQUEST_AGE_S))
    assert isinstance(fresh, Verified)


def test_timestamp_must_be_whole_seconds():
    assert timestamp_fresh(str(NOW), NOW)
    assert not timestamp_fresh("soon", NOW) and not timestamp_fresh("", NOW)
    assert not timestamp_fresh(str(NOW * 1000), NOW)  # milliseconds are not Feishu's format


def test_token_is_read_where_each_schema_puts_it(verifier: WebhookVerifier):
    assert token_of(event("t2")) == "t2"
    assert token_of({"uuid": "u", "token": "t1", "event": {"type": "x"}}) == "t1"
    assert token_of({"schema": "2.0", "token": TOKEN, "header": {}}) is None  # not at the top
    for payload in (
        event("wrong"),
        event(TOKEN[:-1]),
        {"schema": "2.0", "token": TOKEN, "header": {"token": "wrong"}},
        {"schema": "2.0", "header": "not an object"},
        {"uuid": "u", "token": 7, "event": {}},
        {"uuid": "u", "event": {}},
    ):
        body = push(payload)
        assert verifier.verify(body, headers(body)) == Refusal(401, "invalid verification token")
    v1 = push({"uuid": "u", "token": TOKEN, "event": {"type": "message"}})
    verdict = verifier.verify(v1, headers(v1))
    assert isinstance(verdict, Verified) and verdict.event_type is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<xml/>", "not JSON"),
        (b"[" * 100_000, "not JSON"),
        (json.dumps(event()).encode(), "not encrypted"),
        (b'{"encrypt": 5}', "not a string"),
        (b'{"encrypt": "***"}', "base64"),
        (json.dumps({"encrypt": raw_cipher(b"\xff" * 15 + b"\x01")}).encode(), "not UTF-8"),
        (json.dumps({"encrypt": encrypt(KEY, "not json")}).encode(), "not JSON"),
        (json.dumps({"encrypt": encrypt(KEY, "[1, 2]")}).encode(), "not a JSON object"),
        (push(event() | {"schema": 2}), "schema"),
        (
            json.dumps(
                {"encrypt": encrypt(KEY, '{"type": "url_verification", "token": "' + TOKEN + '"}')}
            ).encode(),
            "no challenge",
        ),
    ],  # fmt: skip
    ids=lambda value: value if isinstance(value, str) else "",  # ciphers are random: no ids
)
def test_signed_but_malformed_is_400_and_unsigned_is_one_401(
    verifier: WebhookVerifier, body: bytes, message: str
):
    """Signed by Feishu but unreadable: a 400 naming why. Unsigned: the same 401 whatever is
    wrong inside, so a sender learns nothing about the padding or the plaintext."""
    verdict = verifier.verify(body, headers(body))
    assert isinstance(verdict, Refusal) and verdict.status == 400 and message in verdict.message
    unsigned = verifier.verify(body, {})
    assert isinstance(unsigned, Refusal) and unsigned.status == 401
    assert "not signed" in unsigned.message
    assert unsigned == verifier.verify(push(event()), {})  # a well-formed event, unsigned


def test_url_check_is_answered_unsigned_only_with_our_key_and_token(verifier: WebhookVerifier):
    check = {"challenge": "c-123", "token": TOKEN, "type": "url_verification"}
    assert verifier.verify(push(check), {}) == Challenge("c-123")
    signed = push(check)
    assert verifier.verify(signed, headers(signed)) == Challenge("c-123")
    for body in (
        push(check | {"token": "wrong"}),
        push(check, key="another-key"),
        json.dumps(check).encode(),  # in the clear: Feishu encrypts it once a key is set
        push(check | {"challenge": ["not", "a", "string"]}),
    ):
        verdict = verifier.verify(body, {})
        assert isinstance(verdict, Refusal) and verdict.status == 401


def test_without_key_or_token_everything_is_refused():
    body = push(event())
    for verifier, missing in (
        (WebhookVerifier(None, TOKEN, clock=lambda: NOW), "FEISHU_ENCRYPT_KEY"),
        (WebhookVerifier(KEY, "", clock=lambda: NOW), "FEISHU_VERIFICATION_TOKEN"),
    ):
        verdict = verifier.verify(body, headers(body))
        assert isinstance(verdict, Refusal) and verdict.status == 401
        assert missing in verdict.message


def test_no_refusal_names_a_secret(verifier: WebhookVerifier):
    bodies = [push(event("wrong")), push(event(), key="other"), b"{", b'{"encrypt": "x"}']
    messages = set()
    for body in bodies:
        for sent in (headers(body), {}, headers(body, ts=0), headers(body, key="other")):
            verdict = verifier.verify(body, sent)
            assert isinstance(verdict, Refusal)
            messages.add(verdict.message)
    assert len(messages) >= 5
    for message in messages:
        assert KEY not in message and TOKEN not in message
