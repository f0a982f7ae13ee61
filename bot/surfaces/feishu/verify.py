"""Feishu webhook pushes checked by the documented algorithms, before lark-oapi sees them.

Feishu's "receive events" guide (open.feishu.cn, event subscription > receive events; the same
for callbacks) defines, once an Encrypt Key is set:

- the body is `{"encrypt": base64(iv + AES-256-CBC(plaintext))}`, the key `sha256(encrypt_key)`,
  the IV the first 16 bytes of the decoded data, PKCS#7 padding;
- `X-Lark-Signature` = sha256 hex of `X-Lark-Request-Timestamp + X-Lark-Request-Nonce +
  encrypt_key`, UTF-8 encoded, followed by the raw body bytes; every push is signed except the
  URL check (`url_verification`), which comes encrypted but without those headers;
- the Verification Token is inside the plaintext: `header.token` for schema 2.0 pushes, `token`
  at the top for the older schema and the URL check.

The surface used to let lark-oapi do all this and guessed a 401 from the text of its errors; it
also decrypts before it checks the signature. Here the signature and its timestamp come first
(a request older or newer than five minutes is a replay and is refused, as Slack's check does),
then decryption, then the token. The result is the verified plaintext or a `Refusal` whose
message names what failed and never a secret. An unsigned request gets one refusal whatever
went wrong, so decrypting it teaches the sender nothing (no padding oracle).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from bot.errors import SurfaceError

SIGNATURE_HEADER = "X-Lark-Signature"
TIMESTAMP_HEADER = "X-Lark-Request-Timestamp"
NONCE_HEADER = "X-Lark-Request-Nonce"
MAX_REQUEST_AGE_S = 300  # as Slack's check: a signed request further from now is a replay
_BLOCK = 16  # AES block size, also the IV's length


class MalformedPush(SurfaceError, ValueError):
    """A push that cannot be read (base64, ciphertext, padding, UTF-8, JSON): the message says
    which, and never contains the key, the token or the body."""


@dataclass(frozen=True)
class Refusal:
    """The webhook's answer to a push it will not act on: 401 unauthenticated, 400 malformed."""

    status: int
    message: str


@dataclass(frozen=True)
class Challenge:
    """Feishu's URL check, verified: answer `{"challenge": ...}`."""

    challenge: str


@dataclass(frozen=True)
class Verified:
    """A signed, fresh push whose token matched: the decrypted JSON and its exact bytes."""

    payload: dict[str, Any]
    plaintext: bytes

    @property
    def event_type(self) -> str | None:
        """`header.event_type` of a schema 2.0 push; None for the older schema."""
        if not _is_v2(self.payload):
            return None
        header = self.payload.get("header")
        kind = header.get("event_type") if isinstance(header, dict) else None
        return kind if isinstance(kind, str) else None


Verdict = Verified | Challenge | Refusal

NOT_SIGNED = Refusal(
    401,
    "request is not signed: X-Lark-Signature, X-Lark-Request-Timestamp and X-Lark-Request-Nonce "
    "are required (only Feishu's URL check comes without them)",
)
BAD_SIGNATURE = Refusal(401, "signature verification failed")
STALE = Refusal(
    401, "request timestamp is too old or in the future (more than 5 minutes from now): a replay?"
)
BAD_TOKEN = Refusal(401, "invalid verification token")


def decrypt(encrypted: str, encrypt_key: str) -> bytes:
    """The plaintext of an `encrypt` field (AES-256-CBC, key sha256(encrypt_key), IV first)."""
    try:
        data = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedPush("the encrypted body is not valid base64") from None
    if len(data) < 2 * _BLOCK or len(data) % _BLOCK:
        raise MalformedPush("the encrypted body has the wrong length for AES-CBC")
    key = hashlib.sha256(encrypt_key.encode()).digest()
    decryptor = Cipher(algorithms.AES(key), modes.CBC(data[:_BLOCK])).decryptor()
    padded = decryptor.update(data[_BLOCK:]) + decryptor.finalize()
    unpadder = padding.PKCS7(_BLOCK * 8).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise MalformedPush("the decrypted body has bad padding") from None


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """`X-Lark-Signature` as Feishu computes it."""
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def signature_ok(timestamp: str, nonce: str, signed: str, encrypt_key: str, body: bytes) -> bool:
    """The request's signature matches (compared in constant time); header text that cannot
    be encoded (a client may send anything) is simply a mismatch."""
    try:
        expected = signature(timestamp, nonce, encrypt_key, body).encode()
        return hmac.compare_digest(expected, signed.encode())
    except UnicodeError:
        return False


def timestamp_fresh(timestamp: str, now: float, max_age_s: float = MAX_REQUEST_AGE_S) -> bool:
    """The signed timestamp (seconds) is within `max_age_s` of now, either way."""
    try:
        sent = int(timestamp)
    except ValueError:
        return False
    return abs(now - sent) <= max_age_s


def token_of(payload: dict[str, Any]) -> Any:
    """Where the push carries the Verification Token: `header.token` (schema 2.0), else `token`."""
    if _is_v2(payload):
        header = payload.get("header")
        return header.get("token") if isinstance(header, dict) else None
    return payload.get("token")


def token_ok(payload: dict[str, Any], expected: str) -> bool:
    """The push's token is ours (constant-time compare; a missing or odd token is not)."""
    token = token_of(payload)
    if not isinstance(token, str) or not token:
        return False
    return hmac.compare_digest(expected.encode(), token.encode(errors="surrogatepass"))


def open_push(body: bytes, encrypt_key: str) -> tuple[dict[str, Any], bytes]:
    """The JSON object inside an encrypted push, and its bytes; MalformedPush otherwise."""
    try:
        outer = json.loads(body)
    except (ValueError, RecursionError):
        raise MalformedPush("the body is not JSON") from None
    if not isinstance(outer, dict) or "encrypt" not in outer:
        raise MalformedPush(
            'the body is not encrypted ({"encrypt": ...}): Feishu encrypts every push once an '
            "Encrypt Key is set"
        )
    if not isinstance(outer["encrypt"], str):
        raise MalformedPush("the encrypt field is not a string")
    plaintext = decrypt(outer["encrypt"], encrypt_key)
    try:
        payload = json.loads(plaintext.decode())
    except UnicodeDecodeError:
        raise MalformedPush("the decrypted body is not UTF-8") from None
    except (ValueError, RecursionError):
        raise MalformedPush("the decrypted body is not JSON") from None
    if not isinstance(payload, dict):
        raise MalformedPush("the decrypted body is not a JSON object")
    if not isinstance(payload.get("schema", ""), str):
        raise MalformedPush("the decrypted body's schema is not a string")  # where is the token?
    return payload, plaintext


class WebhookVerifier:
    """Checks one app's pushes; configuration only, so one instance serves every request."""

    def __init__(
        self,
        encrypt_key: str | None,
        verification_token: str | None,
        *,
        max_age_s: float = MAX_REQUEST_AGE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._encrypt_key = encrypt_key or None
        self._token = verification_token or None
        self._max_age_s = max_age_s
        self._clock = clock

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Verdict:
        """Signature, timestamp, decryption, token, in that order; see the module docstring."""
        key, token = self._encrypt_key, self._token
        if key is None:
            # without the key nothing is signed: a click would be trusted on the static
            # verification token alone (setup_feishu refuses to start like this)
            return Refusal(401, "FEISHU_ENCRYPT_KEY is not set")
        if token is None:
            return Refusal(401, "FEISHU_VERIFICATION_TOKEN is not set")
        timestamp = headers.get(TIMESTAMP_HEADER)
        nonce = headers.get(NONCE_HEADER)
        signed = headers.get(SIGNATURE_HEADER)
        if timestamp is None or nonce is None or signed is None:
            return _url_check(body, key, token)
        if not signature_ok(timestamp, nonce, signed, key, body):
            return BAD_SIGNATURE
        if not timestamp_fresh(timestamp, self._clock(), self._max_age_s):
            return STALE
        try:
            payload, plaintext = open_push(body, key)
        except MalformedPush as exc:
            return Refusal(400, str(exc))
        if not token_ok(payload, token):
            return BAD_TOKEN
        if payload.get("type") == "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str):
                return Refusal(400, "the URL check has no challenge")
            return Challenge(challenge)
        return Verified(payload, plaintext)


def _url_check(body: bytes, encrypt_key: str, token: str) -> Challenge | Refusal:
    """An unsigned request is answered only if it is our URL check: encrypted with our key,
    carrying our token. Anything else gets the same refusal, however it failed."""
    try:
        payload, _ = open_push(body, encrypt_key)
    except MalformedPush:
        return NOT_SIGNED
    challenge = payload.get("challenge")
    is_check = payload.get("type") == "url_verification" and isinstance(challenge, str)
    if not is_check or not token_ok(payload, token):
        return NOT_SIGNED
    return Challenge(challenge)


def _is_v2(payload: dict[str, Any]) -> bool:
    """Schema 2.0 as lark-oapi tells it: a non-empty `schema` string."""
    schema = payload.get("schema")
    return isinstance(schema, str) and bool(schema)
