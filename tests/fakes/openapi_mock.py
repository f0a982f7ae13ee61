"""OpenApiMock: a local API that checks every request against an OpenAPI document.

An aiohttp server on 127.0.0.1, port 0. Each request is recorded as it arrived (raw path and
query, headers, body bytes, Content-Type), then checked by openapi-core, a validator nobody
here wrote: parameters deserialised by their style, the body by its media type, the security
requirement (some alternative with every scheme it needs). A request that fails is answered
401 (security) or 400 (anything else) with the validator's errors, as a strict API would; one
that passes gets 200 and what openapi-core made of it. `expect_headers` adds exact values an
auth header must carry (openapi-core checks presence only).

openapi-core 0.23 has gaps the checked serialisations avoid: it reads `spaceDelimited` as
split on a literal `%20` (after decoding), an exploded `form` object from one query value,
and `label`/`matrix` path values not at all; `skip_validation` names the paths (and what
is under them) that a test checks against the specification's table alone. `check_spec=False`
skips openapi-core's check of the document itself (slow for a published document of
megabytes, which its publisher already checks).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.validation.request.exceptions import SecurityValidationError
from werkzeug.datastructures import Headers, ImmutableMultiDict


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    raw_path: str
    raw_query: str
    headers: dict[str, str]
    body: bytes
    content_type: str
    errors: tuple[str, ...]
    validated: bool


class _Request:
    """openapi-core's Request protocol over a received aiohttp request."""

    def __init__(self, request: web.Request, body: bytes, prefix: str) -> None:
        self.host_url = f"{request.url.scheme}://{request.url.host}:{request.url.port}"
        self.path = request.path
        self.method = request.method.lower()
        self.body = body or None
        self.content_type = request.headers.get("Content-Type", "")
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(list(request.query.items())),
            header=Headers(list(request.headers.items())),
            cookie=ImmutableMultiDict(list(request.cookies.items())),
        )
        self.prefix = prefix


class OpenApiMock:
    """Validates requests with openapi-core; `received` holds each request as it arrived."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        expect_headers: Mapping[str, str] | None = None,
        skip_validation: frozenset[str] = frozenset(),
        check_spec: bool = True,
    ) -> None:
        self.spec = dict(spec)
        self.expect_headers = dict(expect_headers or {})
        self.skip_validation = skip_validation
        self.check_spec = check_spec
        self.received: list[Received] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._openapi: OpenAPI | None = None
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.app = app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        # openapi-core reads application/json; the JSON dialects (merge patches) are JSON too,
        # and so are what chatops sends where a spec accepts anything (Kubernetes' `*/*`) and
        # Datadog's `text/json`
        dialects = {
            media: json.loads
            for media in _request_media_types(self.spec)
            if media.endswith(("+json", "+yaml")) or media in ("*/*", "text/json")
        }
        config = Config(extra_media_type_deserializers=dialects)
        if not self.check_spec:  # a published document of megabytes: only requests are checked
            config = Config(extra_media_type_deserializers=dialects, spec_validator_cls=None)
        spec = {**self.spec, "servers": [{"url": self.url}]}
        self._openapi = OpenAPI.from_dict(spec, config=config)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        errors: list[str] = []
        unauthorised = False
        for header, value in self.expect_headers.items():
            if request.headers.get(header) != value:
                errors.append(f"header {header} missing or wrong")
                unauthorised = True
        unmarshalled: Any = None
        path = request.path
        validated = not any(path == p or path.startswith(p + "/") for p in self.skip_validation)
        if validated:
            assert self._openapi is not None
            with warnings.catch_warnings():
                # allowEmptyValue is deprecated (still read); oauth2 schemes it cannot check
                # ("Unsupported scheme type"): `expect_headers` checks their token instead
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.simplefilter("ignore", UserWarning)
                result = self._openapi.unmarshal_request(_Request(request, body, self.url))
            for error in result.errors:
                unauthorised = unauthorised or isinstance(error, SecurityValidationError)
                cause = error.__cause__ or getattr(error, "schema_errors", None) or ""
                errors.append(f"{type(error).__name__}: {error} {cause}".strip())
            unmarshalled = {
                "query": dict(result.parameters.query),
                "path": dict(result.parameters.path),
                "body": result.body,
            }
        self.received.append(
            Received(
                method=request.method,
                path=request.path,
                raw_path=request.raw_path.split("?", 1)[0],
                raw_query=request.raw_path.split("?", 1)[1] if "?" in request.raw_path else "",
                headers=dict(request.headers),
                body=body,
                content_type=request.headers.get("Content-Type", ""),
                errors=tuple(errors),
                validated=validated,
            )
        )
        if errors:
            return web.json_response({"errors": errors}, status=401 if unauthorised else 400)
        return web.json_response(json.loads(json.dumps(unmarshalled, default=str)))


def _request_media_types(spec: Mapping[str, Any]) -> set[str]:
    return {
        str(media)
        for item in (spec.get("paths") or {}).values()
        for op in item.values()
        if isinstance(op, Mapping) and isinstance(op.get("requestBody"), Mapping)
        for media in op["requestBody"].get("content") or {}
    }
