"""Secret redaction for anything that leaves a tool call: observations, the call log, cards.

Two rules, applied together:
1. Known secret values (a connector's tokens, read from the environment) are replaced wherever
   they appear, in every encoding the HTTP client or a server echoing a URL produces (see
   `encoded_forms`), and their base64 (`user:password`) forms when given.
2. Key names that look secret (`token`, `secret`, `password`, `api_key`, `authorization`, ...)
   have their scalar values replaced, even when the value is not a known secret.

API:
- `redact(value, secrets) -> value`: a copy of a JSON-like value (dicts, lists, tuples, strings,
  numbers) with secrets replaced by `REDACTED`; mappings become dicts, tuples stay tuples.
- `redact_text(text, secrets) -> str`: free text with known secrets and obvious credential
  patterns (`Bearer xyz`, `api_key=xyz`, `"password": "xyz"`) replaced.
- `redact_query_params(text, names) -> str`: the values of the named query parameters (a
  connector's `auth: query` parameter) replaced in any URL the text shows.
- `drop_cut_end(text, secrets) -> str`: a text cut at an arbitrary point without the end where
  half a secret could hide (redact after it).
- `is_secret_key(name) -> bool`: the key-name heuristic on its own.
- `mask_known(value, secrets) -> value`: only the known secret values replaced (approval cards:
  a card must show exactly what is approved, so it hides nothing the heuristic merely suspects).
- `secret_looking(value) -> list[str]`: the paths (`a.b.0`) of values the heuristic would hide,
  for the card to mark them "looks like a secret".
- `Redactor`: the union of every secret the process knows (the runtime builds one), with the
  functions above bound to it, `stream()` for text that arrives in pieces, and
  `install_log_redaction(redactor)` for log lines.

Secret values shorter than `MIN_SECRET_LEN` characters are ignored: replacing every "a" in a
text would destroy it while protecting nothing.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from yarl import URL

log = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
MIN_SECRET_LEN = 4
CUT_TAIL_CHARS = 64  # at least this much of a cut text's end is dropped (a credential's piece)

_SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "apikey",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "privatekey",
        "signature",
    }
)
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"), ("auth", "key")}
)
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
_LOWER_ESCAPES = re.compile(r"%[0-9A-F]{2}")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_TEXT_PATTERNS = (
    # Authorization header values in free text: "Bearer abc.def", "Basic dXNlcjpwYXNz"
    re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{6,})"),
    # key=value / key: value / "key": "value" for secret-looking keys
    re.compile(
        r"(?i)([\"']?[A-Za-z0-9_-]*(?:token|secret|password|passwd|api[_-]?key|apikey"
        r"|authorization|credential)[A-Za-z0-9_-]*[\"']?\s*[:=]\s*[\"']?)"
        r"([^\s\"'&,;}]{3,})"
    ),
)


def is_secret_key(name: str) -> bool:
    """True when a mapping key names a credential (`api_key`, `X-Auth-Token`, `clientSecret`)."""
    parts = [p.lower() for p in _SPLIT.split(_CAMEL.sub("_", name)) if p]
    if any(part in _SECRET_WORDS for part in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in zip(parts, parts[1:], strict=False))


def encoded_forms(secret: str) -> set[str]:
    """The secret as it can appear on the wire or in an echo of a URL: raw, as yarl (aiohttp's
    URL builder) encodes a query value and a path, as urllib's `quote`/`quote_plus` encode it,
    with lower-case percent escapes (servers re-encode that way), and JSON-escaped (`\\/`)."""
    built = URL.build(path="/" + secret, query={"k": secret})
    forms = {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        quote_plus(secret, safe="/"),
        built.raw_query_string.removeprefix("k="),
        built.raw_path.removeprefix("/"),
    }
    forms |= {_LOWER_ESCAPES.sub(lambda m: m.group(0).lower(), form) for form in forms}
    forms |= {json.dumps(form)[1:-1] for form in forms}
    forms |= {form.replace("/", "\\/") for form in forms}
    return forms


def secret_forms(secrets: Iterable[str]) -> list[str]:
    """Each secret in every encoded form, longest first (so substrings go last)."""
    found: set[str] = set()
    for secret in secrets:
        if not isinstance(secret, str) or len(secret) < MIN_SECRET_LEN:
            continue
        found.update(form for form in encoded_forms(secret) if len(form) >= MIN_SECRET_LEN)
    return sorted(found, key=len, reverse=True)


def redact_query_params(text: str, names: Iterable[str]) -> str:
    """The values of the named query parameters replaced wherever a URL shows them: after `?`,
    `&` or `;`, and inside a percent-encoded URL (`%3Fkey%3D...`), whatever the value is."""
    spelled = {form for name in names if name for form in (name, quote(name, safe=""))}
    if not spelled:
        return text
    alternatives = "|".join(re.escape(n) for n in sorted(spelled, key=len, reverse=True))
    raw = re.compile(rf"(?<=[?&;])({alternatives})=[^&#\s\"'<>\\]*")
    encoded = re.compile(rf"(?i)(?<=%3F|%26)({alternatives})%3D(?:(?!%26|%23)[^&#\s\"'<>\\])*")
    text = raw.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    return encoded.sub(lambda m: f"{m.group(1)}%3D{REDACTED}", text)


def _replace_known(text: str, variants: list[str]) -> str:
    for variant in variants:
        if variant in text:
            text = text.replace(variant, REDACTED)
    return text


def _looks_like_credential(word: str) -> bool:
    """A run of letters only ("Basic authentication") is prose; a credential has digits,
    mixed case after the first letter, or base64/JWT punctuation."""
    return any(c.isdigit() or c in "._~+/=-" for c in word) or any(c.isupper() for c in word[1:])


def _replace_patterns(text: str) -> str:
    header, keyed = _TEXT_PATTERNS

    def header_sub(m: re.Match[str]) -> str:
        if m.group(3) == REDACTED or not _looks_like_credential(m.group(3)):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{REDACTED}"

    def keyed_sub(m: re.Match[str]) -> str:
        value = m.group(2)
        if value.startswith(REDACTED) or value.isdigit() or value.lower() in _AUTH_SCHEMES:
            return m.group(0)  # "Authorization: Bearer <x>": the header pattern handled <x>
        return f"{m.group(1)}{REDACTED}"

    return keyed.sub(keyed_sub, header.sub(header_sub, text))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Free text with known secret values and credential-looking patterns replaced."""
    return _replace_patterns(_replace_known(text, secret_forms(secrets)))


def drop_cut_end(text: str, secrets: Iterable[str] = ()) -> str:
    """A text cut off at an arbitrary point (a body read up to a byte limit), minus the end
    where a secret cut in half could hide: such a piece is no longer recognisable as a secret,
    so it is dropped before the text is redacted."""
    forms = secret_forms(secrets)
    tail = max(len(forms[0]) if forms else 0, CUT_TAIL_CHARS)
    return text[: max(0, len(text) - tail)]


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like value with secrets replaced (see the module docstring)."""
    return _redact(value, secret_forms(secrets))


def _redact(value: Any, variants: list[str]) -> Any:
    if isinstance(value, str):
        return _replace_patterns(_replace_known(value, variants))
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key) and _is_scalar_secret(item):
                out[key] = REDACTED
            else:
                out[key] = _redact(item, variants)
        return out
    if isinstance(value, list):
        return [_redact(item, variants) for item in value]
    if isinstance(value, tuple):
        return tuple(_redact(item, variants) for item in value)
    return value


def _is_scalar_secret(item: Any) -> bool:
    """Strings and numbers under a secret key are hidden; None, booleans and containers are not
    (a container is walked instead, so `{"auth": {"password": ...}}` keeps its shape)."""
    if item is None or isinstance(item, bool):
        return False
    return isinstance(item, str | int | float | bytes)


def mask_known(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of a JSON-like value with only the known secret values replaced."""
    variants = secret_forms(secrets)
    if not variants:
        return value
    return _walk_strings(value, lambda text: _replace_known(text, variants))


def _walk_strings(value: Any, change: Any) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {key: _walk_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk_strings(item, change) for item in value]
    if isinstance(value, tuple):
        return tuple(_walk_strings(item, change) for item in value)
    return value


def secret_looking(value: Any, path: str = "") -> list[str]:
    """Paths of the values `redact` would hide by the heuristic (not known secrets): a scalar
    under a secret-looking key, or text containing a credential-looking pattern."""
    found: list[str] = []
    if isinstance(value, str):
        if value != REDACTED and _replace_patterns(value) != value:
            found.append(path or "(value)")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            secret_key = isinstance(key, str) and is_secret_key(key) and _is_scalar_secret(item)
            if secret_key and item != REDACTED:
                found.append(where)
            else:
                found.extend(secret_looking(item, where))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found.extend(secret_looking(item, f"{path}.{index}" if path else str(index)))
    return found


class Redactor:
    """Every secret this process knows, masked in every output, whichever output carries it.

    One per process, built by the runtime and passed to whatever shows text: `static` holds the
    settings' secrets (platform tokens and signing secrets, the model key, the database
    password), `source()` the loaded connectors' (read when asked: an MCP server that comes up
    later adds its own). Encoded forms are computed once per distinct set of values.
    """

    def __init__(
        self, static: Iterable[str] = (), *, source: Callable[[], Iterable[str]] | None = None
    ) -> None:
        self._static = tuple(s for s in static if isinstance(s, str) and s)
        self._source = source
        self._key: frozenset[str] = frozenset()
        self._forms: list[str] = []

    def secrets(self) -> list[str]:
        """The raw secret values known now."""
        found = list(self._static)
        if self._source is not None:
            try:
                found.extend(s for s in self._source() if isinstance(s, str) and s)
            except Exception:  # noqa: BLE001 - the settings' secrets are still masked
                log.warning("could not read the connectors' secret values", exc_info=True)
        return found

    def forms(self) -> list[str]:
        """Every known secret in every encoded form, longest first."""
        key = frozenset(s for s in self.secrets() if len(s) >= MIN_SECRET_LEN)
        if key != self._key:
            self._key, self._forms = key, secret_forms(key)
        return self._forms

    def text(self, text: str) -> str:
        """Free text with known secrets and credential-looking patterns replaced."""
        return _replace_patterns(_replace_known(text, self.forms()))

    def known_text(self, text: str) -> str:
        """Free text with only the known secrets replaced (a model's observation, an answer)."""
        return _replace_known(text, self.forms())

    def value(self, value: Any) -> Any:
        """`redact` with every known secret (known values, secret-looking keys and patterns)."""
        return _redact(value, self.forms())

    def mask(self, value: Any) -> Any:
        """`mask_known` with every known secret: only known values replaced."""
        forms = self.forms()
        return _walk_strings(value, lambda t: _replace_known(t, forms)) if forms else value

    def stream(self) -> StreamRedaction:
        """A redaction for text that arrives in pieces (a streamed answer)."""
        return StreamRedaction(self)


class StreamRedaction:
    """Known secrets masked in text that arrives in pieces: a piece's end that is the beginning
    of a secret is held back until the next piece (or `flush`) shows whether it is one, so a
    secret split across two chunks is never shown; text that cannot be one flows at once. What
    comes out, joined, equals `redactor.known_text` of the whole text."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""

    def push(self, piece: str) -> str:
        """The masked text that is safe to show now (maybe "")."""
        raw = self._held + piece
        forms = self._redactor.forms()
        if not forms:
            self._held = ""
            return raw
        cut = _safe_cut(raw, _start_of_a_prefix(raw, forms), forms)
        self._held = raw[cut:]
        return _replace_known(raw[:cut], forms)

    def flush(self) -> str:
        """Whatever was held back, masked (the text is complete)."""
        raw, self._held = self._held, ""
        return self._redactor.known_text(raw)


def _start_of_a_prefix(text: str, forms: list[str]) -> int:
    """Where the earliest end of `text` that begins some secret form starts (len: none does)."""
    cut = len(text)
    for form in forms:
        start = max(0, len(text) - len(form) + 1)
        while (start := text.find(form[0], start, cut)) != -1:
            if form.startswith(text[start:]):
                cut = start
                break
            start += 1
    return cut


def _safe_cut(text: str, cut: int, forms: list[str]) -> int:
    """`cut` moved back to the start of any secret occurrence that spans it."""
    moved = True
    while moved and cut > 0:
        moved = False
        for form in forms:
            start = text.rfind(form, max(0, cut - len(form) + 1), cut + len(form) - 1)
            if 0 <= start < cut < start + len(form):
                cut, moved = start, True
    return cut


class RedactingLogFilter(logging.Filter):
    """A handler filter that masks every known secret in a log record: its message (after the
    arguments are merged in), its traceback and stack."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.msg = self._redactor.text(record.getMessage())
            record.args = None
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = self._redactor.text(record.exc_text)
            if record.stack_info:
                record.stack_info = self._redactor.text(record.stack_info)
        except Exception:  # noqa: BLE001 - a record that cannot be redacted is not shown whole
            record.msg, record.args, record.exc_info, record.exc_text = (
                "(a log record that could not be redacted)", None, None, None,
            )  # fmt: skip
        return True


def install_log_redaction(
    redactor: Redactor, logger: logging.Logger | None = None
) -> Callable[[], None]:
    """Mask every known secret in whatever the handlers of `logger` (default: root) print (a
    filter an earlier redactor left is replaced); returns what takes the filters off again."""
    target = logger if logger is not None else logging.getLogger()
    handlers = list(target.handlers)
    if not handlers and logging.lastResort is not None:  # no handler: warnings go there
        handlers.append(logging.lastResort)
    installed: list[tuple[logging.Handler, RedactingLogFilter]] = []
    for handler in handlers:
        for old in [f for f in handler.filters if isinstance(f, RedactingLogFilter)]:
            handler.removeFilter(old)
        installed.append((handler, RedactingLogFilter(redactor)))
        handler.addFilter(installed[-1][1])

    def uninstall() -> None:
        for handler, added in installed:
            handler.removeFilter(added)

    return uninstall
