"""HTTP actions as tools: validate the arguments, build one request, turn the answer into text.

Everything the model can get wrong (bad arguments, HTTP errors, timeouts, a redirect off-site)
comes back as an observation it can act on, never as an exception; secrets are redacted from
every observation and log line. Requests never leave the origin of `base_url`, carry no cookie
from an earlier call (`client_session`), and read no more of a body than the observation uses.
"""

from __future__ import annotations

import codecs
import copy
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import aiohttp
from jsonschema import Draft202012Validator
from tenacity import RetryCallState, retry_if_result
from yarl import URL

from bot.engine.arguments import validation_error
from bot.engine.artifacts import is_document_type
from bot.engine.retry import RetryPolicy, parse_retry_after
from bot.engine.tools import Tool, ToolResult
from bot.errors import ConnectorError
from bot.redaction import drop_cut_end, redact_query_params, redact_text
from connectors.auth import MissingSecretError, credentials, secret_values
from connectors.manifest import BODY_METHODS, PATH_PARAM_RE, HttpAction, HttpConnector, QueryAuth
from connectors.results import render_result
from connectors.retry import RETRYABLE_STATUSES, attempts_for

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
ERROR_BODY_CHARS = 500
ERROR_READ_BYTES = 16 * 1024  # an error observation shows 500 characters of the body
TEXT_READ_SLACK_BYTES = 16 * 1024  # read beyond 4 bytes per observation character


@dataclass(frozen=True)
class _Attempt:
    """One request's outcome; `retryable` results may be repeated for idempotent methods."""

    result: ToolResult
    retryable: bool = False
    retry_after: str | None = None


@dataclass(frozen=True)
class _Body:
    """A response body as far as it was read; `cut_after_bytes` is set when reading stopped at
    the limit (the rest was never read)."""

    text: str
    cut_after_bytes: int | None = None


class RequestRefused(ConnectorError):
    """The request would leave the connector's origin, or its path would not be the action's
    (a safety rule, not a network error)."""


def base_url_of(manifest: HttpConnector, environ: Mapping[str, str]) -> URL:
    """`base_url`, or the value of `base_url_env` when that variable is set."""
    raw = manifest.base_url
    if manifest.base_url_env and environ.get(manifest.base_url_env):
        raw = environ[manifest.base_url_env]
    return URL(raw.rstrip("/"))


def _segment(name: str, value: Any) -> str:
    """One path argument, encoded so it stays one segment ('/' and '..' cannot escape); an
    empty one would turn `/users/{id}` into the collection `/users/`, so it is refused."""
    text = value if isinstance(value, str) else json.dumps(value)
    if not text:
        raise RequestRefused(f"the path argument {name!r} is empty; give it a value")
    encoded = quote(text, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def compiled_parameters(action: HttpAction) -> dict[str, Any]:
    """The JSON Schema the model sees and the arguments are checked against.

    Arguments the schema does not name are refused (`additionalProperties: false`) unless the
    manifest's `parameters` says what they may be (`additionalProperties` of its own), and a
    path argument must not be empty (`minLength: 1`; `_segment` checks it again).
    """
    schema = copy.deepcopy(action.parameters)
    schema.setdefault("additionalProperties", False)
    properties = schema.setdefault("properties", {})
    for name in PATH_PARAM_RE.findall(action.path):
        if isinstance(properties.get(name), dict):
            properties[name].setdefault("minLength", 1)
    return schema


async def read_body(response: aiohttp.ClientResponse, limit: int) -> _Body:
    """At most `limit` bytes of the body, streamed: a huge answer never sits in memory whole.
    The connection of a body left unread is closed, not reused."""
    data = bytearray()
    while len(data) <= limit:
        chunk = await response.content.read(limit + 1 - len(data))
        if not chunk:
            break
        data += chunk
    cut = len(data) > limit
    del data[limit:]
    try:
        decoder = codecs.getincrementaldecoder(response.charset or "utf-8")(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(bytes(data), final=not cut)  # a character cut in half is dropped
    return _Body(text, limit if cut else None)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def build_request(
    action: HttpAction, args: Mapping[str, Any], base: URL
) -> tuple[URL, list[tuple[str, str]], Any]:
    """The URL, query pairs and body of one call (DESIGN §3 mapping rules).

    Path placeholders take their argument; the remaining arguments go to the query string for
    methods without a body, or into the body, merged over the static `query` / `body`. With
    `body_arg`, that argument is the body and the others go to the query string. Names in
    `wire_names` are sent under their wire name.
    """
    used = set(PATH_PARAM_RE.findall(action.path))
    path = PATH_PARAM_RE.sub(lambda m: _segment(m.group(1), args[m.group(1)]), action.path)
    url = URL(str(base) + path, encoded=True)
    if url.origin() != base.origin() or ".." in url.raw_parts or "." in url.raw_parts[1:]:
        raise RequestRefused(f"the path of {action.name!r} leaves {base.origin()}")
    rest = {k: v for k, v in args.items() if k not in used}
    body: Any = None
    if action.body_arg is not None:
        body = rest.pop(action.body_arg, None)
        if isinstance(body, Mapping) and action.body is not None:
            body = {**action.body, **body}
        elif body is None:
            body = action.body
        in_query = rest
    elif action.method not in BODY_METHODS:
        in_query = rest
    else:
        in_query = {k: v for k, v in rest.items() if k in action.query_args}
        fields = {k: v for k, v in rest.items() if k not in action.query_args}
        if action.body is not None or fields:
            body = {**(action.body or {}), **_on_the_wire(action, fields)}
    query = pairs({**action.query, **_on_the_wire(action, in_query)})
    return url, query, body


def _on_the_wire(action: HttpAction, args: Mapping[str, Any]) -> dict[str, Any]:
    return {action.wire_names.get(k, k): v for k, v in args.items()}


def pairs(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query-string or form fields: lists repeat the name, None is left out, booleans are
    `true`/`false`, objects JSON."""
    out: list[tuple[str, str]] = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, list):
            out.extend((key, _query_value(item)) for item in value)
        else:
            out.append((key, _query_value(value)))
    return out


def body_arguments(action: HttpAction, body: Any) -> dict[str, Any]:
    """The request's body keyword for aiohttp, built afresh per attempt (a form is read once)."""
    if body is None:
        return {}
    if action.body_encoding == "json":
        return {"json": body}
    if not isinstance(body, Mapping):
        raise RequestRefused(f"a {action.body_encoding} body must be an object of fields")
    fields = pairs(body)
    if action.body_encoding == "form":
        return {"data": fields}
    return {"data": aiohttp.FormData(fields, default_to_multipart=True)}


class HttpActionTool:
    """One manifest action bound to the app's shared session; `__call__` is `Tool.invoke`."""

    def __init__(
        self,
        manifest: HttpConnector,
        action: HttpAction,
        http: aiohttp.ClientSession,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.manifest = manifest
        self.action = action
        self.http = http
        self.environ = environ if environ is not None else os.environ
        self.name = f"{manifest.name}__{action.name}"
        self.parameters = compiled_parameters(action)
        self.validator = Draft202012Validator(self.parameters)
        self.retry = RetryPolicy(attempts=1 + manifest.retries, base_s=manifest.retry_backoff_s)
        auth = manifest.auth
        self._auth_params = [auth.param] if isinstance(auth, QueryAuth) else []

    def secrets(self) -> list[str]:
        return secret_values(self.manifest.auth, self.environ)

    def redact(self, text: str) -> str:
        """Secret values in every encoding, and the auth query parameter by name in any URL."""
        return redact_query_params(redact_text(text, self.secrets()), self._auth_params)

    def tool(self) -> Tool:
        description = self.action.description
        if self.manifest.description:
            description = f"{description} ({self.manifest.name}: {self.manifest.description})"
        return Tool(
            name=self.name,
            description=description,
            parameters=self.parameters,
            invoke=self,
            connector=self.manifest.name,
            action=self.action.name,
            policy=self.action.policy(
                mutating=self.action.is_mutating, connector_rules=self.manifest.rules
            ),
            secret_values=self.secrets,
        )

    async def __call__(self, args: dict[str, Any]) -> ToolResult:
        problem = validation_error(self.name, self.validator, args)
        if problem is not None:
            return ToolResult.error(problem)
        try:
            result = await self._call(args)
        except MissingSecretError as exc:
            result = ToolResult.error(f"{self.name} is not configured: {exc}.")
        except RequestRefused as exc:
            result = ToolResult.error(f"Refused: {exc}.")
        except Exception as exc:  # noqa: BLE001 - an observation, and never with a secret in it
            log.warning("%s failed unexpectedly: %s", self.name, type(exc).__name__)
            result = ToolResult.error(f"{self.name} failed: {type(exc).__name__}: {exc}")
        return replace(result, content=self.redact(result.content))

    async def _call(self, args: Mapping[str, Any]) -> ToolResult:
        base = base_url_of(self.manifest, self.environ)
        url, query, body = build_request(self.action, args, base)
        creds = credentials(self.manifest.auth, self.environ)
        headers = {**self.manifest.headers, **self.action.headers, **creds.headers}
        query = [*query, *creds.query.items()]
        method = self.action.method
        retrying = self.retry.retrying(
            retry=retry_if_result(lambda outcome: outcome.retryable),
            hint=_retry_after,
            attempts=attempts_for(method, self.manifest.retries),
            before_sleep=self._log_retry,
        )

        async def attempt() -> _Attempt:
            return await self._attempt(method, url, query, headers, body, base)

        outcome: _Attempt = await retrying(attempt)
        return outcome.result

    def _log_retry(self, state: RetryCallState) -> None:
        method, path = self.action.method, self.action.path
        log.info("retrying %s %s in %.2fs", method, path, state.upcoming_sleep)

    async def _attempt(
        self,
        method: str,
        url: URL,
        query: list[tuple[str, str]],
        headers: Mapping[str, str],
        body: Any,
        base: URL,
    ) -> _Attempt:
        """One request, following redirects that stay on the origin."""
        timeout = aiohttp.ClientTimeout(total=self.manifest.timeout_s)
        target = url
        params: list[tuple[str, str]] | None = query
        try:
            for _ in range(MAX_REDIRECTS + 1):
                async with self.http.request(
                    method,
                    target,
                    params=params,
                    headers=headers,
                    timeout=timeout,
                    allow_redirects=False,
                    **body_arguments(self.action, body),
                ) as response:
                    if response.status in (301, 302, 303, 307, 308):
                        target = self._redirect_target(response, base)
                        params = None  # the Location carries its own query
                        if response.status == 303:
                            method, body = "GET", None
                        continue
                    body = await read_body(response, self._read_limit(response))
                    return self._interpret(response, body)
            return _Attempt(ToolResult.error(f"{self.name}: too many redirects."))
        except RequestRefused as exc:
            return _Attempt(ToolResult.error(f"Refused: {exc}."))
        except TimeoutError:
            message = f"{self.name}: no answer within {self.manifest.timeout_s:g}s (timeout)."
            return _Attempt(ToolResult.error(message), retryable=True)
        except aiohttp.ClientError as exc:
            message = f"{self.name}: request failed: {type(exc).__name__}: {exc}"
            return _Attempt(ToolResult.error(message), retryable=True)

    def _redirect_target(self, response: aiohttp.ClientResponse, base: URL) -> URL:
        location = response.headers.get("Location", "")
        target = response.url.join(URL(location))
        if target.origin() != base.origin():
            raise RequestRefused(
                f"{self.name} was redirected to another host ({target.host}); "
                f"requests stay on {base.host}"
            )
        return target

    def _read_limit(self, response: aiohttp.ClientResponse) -> int:
        """What the observation can use: JSON is read up to `max_response_bytes` (`pick` and
        the compact form need all of it), text up to 4 bytes per observation character."""
        if response.status >= 400:
            return ERROR_READ_BYTES
        spec = self.action.result
        content_type = response.headers.get("Content-Type", "").lower()
        if spec.pick or spec.artifact or "json" in content_type or is_document_type(content_type):
            return self.manifest.max_response_bytes  # documents are kept whole, for the user
        text_bytes = 4 * spec.max_chars + TEXT_READ_SLACK_BYTES
        return min(self.manifest.max_response_bytes, text_bytes)

    def _interpret(self, response: aiohttp.ClientResponse, body: _Body) -> _Attempt:
        status = response.status
        text = body.text
        if body.cut_after_bytes is not None:
            text = drop_cut_end(text, self.secrets())
        if status >= 400:
            short = " ".join(self.redact(text).split())[:ERROR_BODY_CHARS]
            message = f"HTTP {status} {response.reason or ''}".rstrip()
            result = ToolResult.error(f"{self.name} failed: {message}: {short or '(empty body)'}")
            retryable = status in RETRYABLE_STATUSES
            return _Attempt(result, retryable, response.headers.get("Retry-After"))
        content_type = response.headers.get("Content-Type", "")
        if self.action.result.artifact or is_document_type(content_type):
            return _Attempt(self._as_document(response, text, content_type, body.cut_after_bytes))
        rendered = render_result(
            text,
            content_type,
            self.action.result,
            status=status,
            redact=self.redact,
            cut_after_bytes=body.cut_after_bytes,
        )
        return _Attempt(ToolResult(rendered))

    def _as_document(
        self, response: aiohttp.ClientResponse, text: str, content_type: str, cut: int | None
    ) -> ToolResult:
        """A document for the user: whole (up to `max_response_bytes`), secrets redacted; the
        engine attaches it to the answer and shows the model only its name and a summary."""
        if cut is not None:
            text += f"\n\n[...the document was cut after {cut} bytes]"
        return ToolResult(
            text,
            content_type=content_type,
            artifact=True,
            filename=response.content_disposition.filename or ""
            if response.content_disposition
            else "",
        )


def _retry_after(state: RetryCallState) -> float | None:
    """The `Retry-After` of the last answer (a 429 or 503), in seconds."""
    if state.outcome is None or state.outcome.failed:
        return None
    return parse_retry_after(state.outcome.result().retry_after)


def client_session() -> aiohttp.ClientSession:
    """The HTTP client session connectors share. It keeps no cookies: a cookie one connector's
    API sets (say, a session for its admin credential) must never ride along on another
    connector's request, or on the next user's call of the same connector."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())


def http_tools(
    manifest: HttpConnector,
    http: aiohttp.ClientSession,
    *,
    environ: Mapping[str, str] | None = None,
) -> list[Tool]:
    """Every action of an HTTP manifest as a `Tool`."""
    return [HttpActionTool(manifest, a, http, environ=environ).tool() for a in manifest.actions]
