"""HTTP actions as tools: validate the arguments, build one request, turn the answer into text.

Everything the model can get wrong (bad arguments, HTTP errors, timeouts, a redirect off-site)
comes back as an observation it can act on, never as an exception; secrets are redacted from
every observation and log line. Requests never leave the origin of `base_url`, carry no cookie
from an earlier call (`client_session`), and read no more of a body than the observation uses.
The request itself (URL, query, body, and the origin it must not leave) is built by
`connectors.http_request`.
"""

from __future__ import annotations

import codecs
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
from jsonschema import Draft202012Validator
from tenacity import RetryCallState, retry_if_result
from yarl import URL

from bot.approvals.schema import policy_metadata
from bot.engine.arguments import validation_error
from bot.engine.artifacts import is_document_type
from bot.engine.retry import RetryPolicy, parse_retry_after
from bot.engine.tools import Audience, Tool, ToolResult
from bot.redaction import drop_cut_end, redact_query_params, redact_text
from connectors.acting_as import ACTING_AS, ActingAs, acting_as, acting_person
from connectors.auth import (
    Credentials,
    MissingSecretError,
    credentials,
    query_params,
    secret_values,
)
from connectors.breaker import CircuitBreaker
from connectors.http_request import (
    RequestRefused,
    base_url_of,
    body_arguments,
    build_request,
    compiled_parameters,
    with_query,
)
from connectors.manifest import HttpAction, HttpConnector
from connectors.oauth_service import OAuthService
from connectors.oauth_vault import CredentialError
from connectors.param_styles import encode
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
    fault: bool = False  # the API's own failure (timeout, connection, 5xx): the breaker counts it
    status: int = 0  # the HTTP status of the answer (0: none came)


@dataclass(frozen=True)
class _Body:
    """A response body as far as it was read; `cut_after_bytes` is set when reading stopped at
    the limit (the rest was never read)."""

    text: str
    cut_after_bytes: int | None = None


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


class HttpActionTool:
    """One manifest action bound to the app's shared session; `__call__` is `Tool.invoke`."""

    def __init__(
        self,
        manifest: HttpConnector,
        action: HttpAction,
        http: aiohttp.ClientSession,
        *,
        environ: Mapping[str, str] | None = None,
        breaker: CircuitBreaker | None = None,
        oauth: OAuthService | None = None,
    ) -> None:
        self.manifest = manifest
        self.breaker = breaker
        self.oauth = oauth
        self.acting_as: ActingAs | None = acting_as(manifest, action)
        self.action = action
        self.http = http
        self.environ = environ if environ is not None else os.environ
        self.name = f"{manifest.name}__{action.name}"
        self.parameters = compiled_parameters(action)
        self.validator = Draft202012Validator(self.parameters)
        self.retry = RetryPolicy(attempts=1 + manifest.retries, base_s=manifest.retry_backoff_s)
        self._auth_params = query_params(manifest.auth)

    def secrets(self) -> list[str]:
        """The connector's secrets, and every person's token seen so far (per-user OAuth)."""
        found = secret_values(self.manifest.auth, self.environ)
        if self.oauth is not None and self.acting_as is not None:
            found += self.oauth.secrets()
        return found

    def redact(self, text: str) -> str:
        """Secret values in every encoding, and the auth query parameter by name in any URL."""
        return redact_query_params(redact_text(text, self.secrets()), self._auth_params)

    def tool(self) -> Tool:
        description = self.action.description
        if self.manifest.description:
            description = f"{description} ({self.manifest.name}: {self.manifest.description})"
        metadata = policy_metadata(
            self.action.policy(
                mutating=self.action.is_mutating, connector_rules=self.manifest.rules
            )
        )
        if self.acting_as is not None:
            metadata[ACTING_AS] = self.acting_as
        return Tool(
            name=self.name,
            description=description,
            parameters=self.parameters,
            invoke=self,
            connector=self.manifest.name,
            action=self.action.name,
            tags=tuple(self.action.tags),
            metadata=metadata,
            secret_values=self.secrets,
            invoke_for=self.call_for if self.acting_as is not None else None,
        )

    async def call_for(self, audience: Audience, args: dict[str, Any]) -> ToolResult:
        """A per-user OAuth action: the call goes out with the credentials of the person its
        rule names (the requester, or the approver), refreshed before expiry and once after a
        401; the bot's token when the rule says bot, or as the fallback."""
        return await self(args, audience=audience)

    async def __call__(
        self, args: dict[str, Any], *, audience: Audience | None = None
    ) -> ToolResult:
        problem = validation_error(self.name, self.validator, args)
        if problem is not None:
            return ToolResult.error(problem)
        if self.breaker is not None and (refused := self.breaker.admit()) is not None:
            return ToolResult.error(refused)
        fault: bool | None = None  # no verdict for the breaker unless a request was answered
        try:
            outcome = await self._acting(args, audience)
            result, fault = outcome.result, outcome.fault
        except CredentialError as exc:
            result = ToolResult.error(f"{self.name} could not use the stored credentials: {exc}.")
        except MissingSecretError as exc:
            result = ToolResult.error(f"{self.name} is not configured: {exc}.")
        except RequestRefused as exc:
            result = ToolResult.error(f"Refused: {exc}.")
        except Exception as exc:  # noqa: BLE001 - an observation, and never with a secret in it
            log.warning("%s failed unexpectedly: %s", self.name, type(exc).__name__)
            result = ToolResult.error(f"{self.name} failed: {type(exc).__name__}: {exc}")
        finally:
            if self.breaker is not None:
                self.breaker.settle(fault)
        return replace(result, content=self.redact(result.content))

    async def _acting(self, args: Mapping[str, Any], audience: Audience | None) -> _Attempt:
        """The call with the right credentials: the connector's own, or a person's."""
        rule = self.acting_as
        if rule is None or rule.on_behalf_of == "bot":
            return await self._call(args)
        person = None
        if audience is not None:
            person = acting_person(
                rule, platform=audience.platform, workspace=audience.workspace,
                requester=audience.requester or next(iter(audience.requesters), ""),
                approvers=audience.approvers,
            )  # fmt: skip
        token = None
        if person is not None and self.oauth is not None:
            token = await self.oauth.access_token(rule.connector, person)
        if token is None:
            if rule.fallback == "bot":
                return await self._call(args)
            who = "the approver" if rule.on_behalf_of == "approver" else "the requester"
            name = f" ({person.user_id})" if person is not None else ""
            return _Attempt(ToolResult.error(
                f"{self.name} acts as {who}{name}, who has not connected {rule.connector}: "
                "the call did not run."
            ))  # fmt: skip
        outcome = await self._call(args, Credentials({"Authorization": f"Bearer {token}"}, {}))
        if outcome.status == 401 and person is not None and self.oauth is not None:
            fresh = await self.oauth.refreshed(rule.connector, person, token)
            if fresh is not None and fresh != token:
                bearer = Credentials({"Authorization": f"Bearer {fresh}"}, {})
                outcome = await self._call(args, bearer)
        return outcome

    async def _call(self, args: Mapping[str, Any], creds: Credentials | None = None) -> _Attempt:
        base = base_url_of(self.manifest, self.environ)
        request = build_request(self.action, args, base)
        if creds is None:
            creds = credentials(self.manifest.auth, self.environ)
        headers = {**self.manifest.headers, **self.action.headers, **creds.headers}
        secret_query = [f"{encode(k)}={encode(v)}" for k, v in creds.query.items()]
        url = with_query(request.url, [*request.query, *secret_query])
        body = request.body
        method = self.action.method
        retrying = self.retry.retrying(
            retry=retry_if_result(lambda outcome: outcome.retryable),
            hint=_retry_after,
            attempts=attempts_for(method, self.manifest.retries),
            before_sleep=self._log_retry,
        )

        async def attempt() -> _Attempt:
            return await self._attempt(method, url, headers, body, base)

        outcome: _Attempt = await retrying(attempt)
        return outcome

    def _log_retry(self, state: RetryCallState) -> None:
        method, path = self.action.method, self.action.path
        log.info("retrying %s %s in %.2fs", method, path, state.upcoming_sleep)

    async def _attempt(
        self,
        method: str,
        url: URL,
        headers: Mapping[str, str],
        body: Any,
        base: URL,
    ) -> _Attempt:
        """One request, following redirects that stay on the origin."""
        timeout = aiohttp.ClientTimeout(total=self.manifest.timeout_s)
        target = url
        try:
            for _ in range(MAX_REDIRECTS + 1):
                async with self.http.request(
                    method,
                    target,
                    headers=headers,
                    timeout=timeout,
                    allow_redirects=False,
                    **body_arguments(self.action, body),
                ) as response:
                    if response.status in (301, 302, 303, 307, 308):
                        target = self._redirect_target(response, base)
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
            return _Attempt(ToolResult.error(message), retryable=True, fault=True)
        except aiohttp.ClientError as exc:
            message = f"{self.name}: request failed: {type(exc).__name__}: {exc}"
            return _Attempt(ToolResult.error(message), retryable=True, fault=True)

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
            retry_after = response.headers.get("Retry-After")
            return _Attempt(result, retryable, retry_after, fault=status >= 500, status=status)
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


def client_session(max_connections: int = 100) -> aiohttp.ClientSession:
    """The HTTP client session connectors share, at most `max_connections` open at once. It
    keeps no cookies: a cookie one connector's API sets (say, a session for its admin
    credential) must never ride along on another connector's request, or on the next user's
    call of the same connector."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=max_connections),
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def http_tools(
    manifest: HttpConnector,
    http: aiohttp.ClientSession,
    *,
    environ: Mapping[str, str] | None = None,
    breaker: CircuitBreaker | None = None,
    oauth: OAuthService | None = None,
) -> list[Tool]:
    """Every action of an HTTP manifest as a `Tool`; `breaker`: the connector's, shared by
    its actions; `oauth`: people's credentials, for a connector with auth type oauth2."""
    return [
        HttpActionTool(manifest, a, http, environ=environ, breaker=breaker, oauth=oauth).tool()
        for a in manifest.actions
    ]
