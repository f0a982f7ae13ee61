"""Redaction: known secret values and secret-looking keys never survive."""

from __future__ import annotations

import base64

from bot.redaction import REDACTED, Redactor, is_secret_key, redact, redact_text


def test_known_secret_replaced_everywhere_in_a_value() -> None:
    secret = "s3cr3t/value+x"
    value = {
        "note": f"token was {secret}",
        "items": [{"url": "https://x/?k=s3cr3t%2Fvalue%2Bx"}, (secret, 3)],
        "count": 3,
        "ok": True,
    }
    out = redact(value, [secret])
    flat = repr(out)
    assert secret not in flat and "s3cr3t%2Fvalue%2Bx" not in flat
    assert out["count"] == 3 and out["ok"] is True
    assert isinstance(out["items"][1], tuple)
    assert value["note"] == f"token was {secret}"  # the input is not modified


def test_secret_keys_hidden_and_containers_walked() -> None:
    out = redact(
        {
            "Authorization": "Bearer abc",
            "X-Api-Key": "k1",
            "clientSecret": 42,
            "auth": {"password": "pw", "user": "me"},
            "max_tokens": 100,
            "author": "alice",
            "token": None,
        },
        [],
    )
    assert out["Authorization"] == REDACTED
    assert out["X-Api-Key"] == REDACTED
    assert out["clientSecret"] == REDACTED
    assert out["auth"] == {"password": REDACTED, "user": "me"}
    assert out["max_tokens"] == 100
    assert out["author"] == "alice"
    assert out["token"] is None


def test_key_heuristic() -> None:
    for name in ("api_key", "apiKey", "x-auth-token", "access_key", "PASSWORD", "private_key"):
        assert is_secret_key(name), name
    for name in ("author", "tokens_used", "status", "keyboard", "monkey"):
        assert not is_secret_key(name), name


def test_free_text_patterns_and_basic_credentials() -> None:
    basic = base64.b64encode(b"user:pa55word").decode()
    text = (
        f"sent Authorization: Basic {basic} then Bearer eyJhbGc.iOi.J9 with api_key=sk-live-1 "
        "and password: hunter2; Basic authentication is prose; max_tokens=100"
    )
    out = redact_text(text, ["pa55word"])
    for leaked in (basic, "eyJhbGc.iOi.J9", "sk-live-1", "hunter2"):
        assert leaked not in out
    assert "Basic authentication is prose" in out
    assert "max_tokens=100" in out
    assert "Authorization: Bearer [REDACTED]" in redact_text("Authorization: Bearer abc.def1")
    scheme = redact_text("Authorization: Token token=abcdef123")
    assert "abcdef123" not in scheme and scheme.startswith("Authorization: Token")


def test_short_secrets_are_ignored() -> None:
    assert redact_text("a cat sat", ["a"]) == "a cat sat"


def test_a_streamed_text_never_shows_a_secret_nor_its_beginning_and_joins_to_the_whole() -> None:
    """Random texts of secrets, their halves and prose, cut at random: what the stream shows
    so far never holds a whole secret, and all of it joined is `known_text` of the whole."""
    import random

    redactor = Redactor(["xoxb-fake-bot-token", "sk-test-key-42", "abcd1234", "34xyzw"])
    pieces = ["hi ", "xoxb-fake-bot-token", " and ", "sk-test-key-42", "abcd1234xyzw", "34xyzw",
              "xoxb-fake", "a/b c", "sk-"]  # fmt: skip
    rng = random.Random(26)
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(8))
        stream, shown, at = redactor.stream(), "", 0
        while at < len(text):
            size = rng.randint(1, 7)
            shown += stream.push(text[at : at + size])
            at += size
            assert not any(secret in shown for secret in redactor.secrets())
        assert shown + stream.flush() == redactor.known_text(text)


def test_text_that_cannot_begin_a_secret_is_shown_at_once() -> None:
    stream = Redactor(["xoxb-fake-bot-token"]).stream()
    assert stream.push("hello wor") == "hello wor"
    assert stream.push("ld xoxb-") == "ld "  # "xoxb-" could be the token: held back
    assert stream.push("fake-bot-token!") == "[REDACTED]!"
    assert stream.flush() == ""


def test_the_redactor_knows_every_connector_and_the_settings_secret() -> None:
    """The settings' secrets and what the source gives now (a connector loaded later too)."""
    loaded: list[str] = []
    redactor = Redactor(["xoxb-fake-bot-token"], source=lambda: loaded)
    assert redactor.text("a billing-token-1234 b") == "a billing-token-1234 b"
    loaded.append("billing-token-1234")
    assert redactor.text("a billing-token-1234 b xoxb-fake-bot-token") == (
        "a [REDACTED] b [REDACTED]"
    )
