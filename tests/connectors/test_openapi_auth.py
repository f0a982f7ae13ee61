"""Imported auth keeps its meaning: alternatives, each an AND of schemes, every credential secret.

The documents have the security sections of Datadog, Cloudflare, Stripe and Kubernetes (as
published: scheme names, header names, descriptions). Each is imported with the CLI, loaded,
called, and the request checked by `OpenApiMock`: openapi-core checks that some alternative's
every scheme is present, `expect_headers` the exact values.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import yaml

from bot.cli import main
from connectors.connector_set import ConnectorSet
from tests.connectors.test_openapi_wire import import_spec
from tests.fakes.openapi_mock import OpenApiMock
from tests.fakes.serving import started


def secured(schemes: dict[str, Any], security: list[dict[str, list]]) -> dict[str, Any]:
    """A document with one operation (`GET /v1/check?q=`) under the given security."""
    return {
        "openapi": "3.0.0",
        "info": {"title": "Secured", "version": "1"},
        "security": security,
        "components": {"securitySchemes": schemes},
        "paths": {
            "/v1/check": {
                "get": {
                    "operationId": "Check",
                    "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }


DATADOG = secured(
    {
        "AuthZ": {"type": "oauth2",
                  "description": "This API uses OAuth 2 with the implicit grant flow.",
                  "flows": {"authorizationCode": {"authorizationUrl": "/oauth2/v1/authorize",
                                                  "tokenUrl": "/oauth2/v1/token", "scopes": {}}}},
        "apiKeyAuth": {"type": "apiKey", "in": "header", "name": "DD-API-KEY",
                       "description": "Your Datadog API Key."},
        "appKeyAuth": {"type": "apiKey", "in": "header", "name": "DD-APPLICATION-KEY",
                       "description": "Your Datadog APP Key."},
    },
    [{"apiKeyAuth": [], "appKeyAuth": []}, {"AuthZ": []}],
)  # fmt: skip
CLOUDFLARE = secured(
    {
        "api_email": {"in": "header", "name": "X-Auth-Email", "type": "apiKey"},
        "api_key": {"in": "header", "name": "X-Auth-Key", "type": "apiKey"},
        "api_token": {"scheme": "bearer", "type": "http"},
        "user_service_key": {"in": "header", "name": "X-Auth-User-Service-Key", "type": "apiKey"},
    },
    [{"api_email": [], "api_key": []}, {"api_token": []}],
)
STRIPE = secured(
    {
        "basicAuth": {"description": "Basic HTTP authentication. Allowed headers-- "
                      "Authorization: Basic <api_key> | Authorization: Basic <base64 hash of "
                      "`api_key:`>", "scheme": "basic", "type": "http"},
        "bearerAuth": {"bearerFormat": "auth-scheme", "description": "Bearer HTTP "
                       "authentication. Allowed headers-- Authorization: Bearer <api_key>",
                       "scheme": "bearer", "type": "http"},
    },
    [{"basicAuth": []}, {"bearerAuth": []}],
)  # fmt: skip
KUBERNETES = secured(
    {"BearerToken": {"description": "Bearer Token authentication", "in": "header",
                     "name": "authorization", "type": "apiKey"}},
    [{"BearerToken": []}],
)  # fmt: skip


async def _call(
    tmp_path: Path,
    http,
    spec: dict[str, Any],
    name: str,
    environ: dict[str, str],
    expect: dict[str, str],
    q: str = "x",
) -> tuple[OpenApiMock, Any, dict[str, Any]]:
    async with started(OpenApiMock(spec, expect_headers=expect)) as api:
        directory = import_spec(tmp_path, spec, name, api.url)
        manifest = yaml.safe_load((directory / f"{name}.yaml").read_text())
        connectors = await ConnectorSet.load(directory, http=http, environ=environ)
        tool = connectors.tools.get(f"{name}__check")
        assert tool is not None
        result = await tool.invoke({"q": q})
        return api, (tool, result), manifest


async def test_datadog_sends_both_keys_as_secrets(
    tmp_path: Path, http, caplog, capsys, monkeypatch
) -> None:
    environ = {"DATADOG_DD_API_KEY": "api-k3y-1234", "DATADOG_DD_APPLICATION_KEY": "app-k3y-5678"}
    for name, value in environ.items():  # the import says which alternative they complete
        monkeypatch.setenv(name, value)
    caplog.set_level(logging.DEBUG)
    api, (tool, result), manifest = await _call(
        tmp_path, http, DATADOG, "datadog", environ,
        {"DD-API-KEY": "api-k3y-1234", "DD-APPLICATION-KEY": "app-k3y-5678"},
        q="app-k3y-5678",  # the API echoes it back: the observation must not show it
    )  # fmt: skip
    assert manifest["auth"] == {
        "type": "any_of",
        "alternatives": [
            {"name": "apiKeyAuth+appKeyAuth", "all_of": [
                {"type": "header", "header": "DD-API-KEY", "value_env": "DATADOG_DD_API_KEY"},
                {"type": "header", "header": "DD-APPLICATION-KEY",
                 "value_env": "DATADOG_DD_APPLICATION_KEY"}]},
            {"name": "AuthZ", "all_of": [{"type": "bearer", "token_env": "DATADOG_TOKEN"}]},
        ],
    }  # fmt: skip
    assert not result.is_error, result.content
    assert api.received[-1].errors == ()
    assert "app-k3y-5678" not in result.content and "[REDACTED]" in result.content
    assert {"api-k3y-1234", "app-k3y-5678"} <= set(tool.secret_values())
    err = capsys.readouterr().err
    assert "auth: 2 alternatives" in err and "completes 'apiKeyAuth+appKeyAuth'" in err
    assert "app-k3y-5678" not in caplog.text and "api-k3y-1234" not in caplog.text


async def test_datadog_token_alternative_and_an_incomplete_pair(tmp_path: Path, http) -> None:
    _, (_, result), _ = await _call(
        tmp_path, http, DATADOG, "datadog", {"DATADOG_TOKEN": "t0ken"},
        {"Authorization": "Bearer t0ken"},
    )  # fmt: skip
    assert not result.is_error, result.content
    directory = tmp_path / "manifests"
    connectors = await ConnectorSet.load(
        directory, http=http, environ={"DATADOG_DD_API_KEY": "only-half"}
    )
    assert connectors.tools.get("datadog__check") is None  # neither alternative is complete
    assert any("DATADOG_DD_APPLICATION_KEY" in line for line in connectors.skipped)


async def test_validate_says_which_alternative_is_used(
    tmp_path: Path, http, capsys, monkeypatch
) -> None:
    await _call(tmp_path, http, DATADOG, "datadog", {"DATADOG_TOKEN": "t0ken"},
                {"Authorization": "Bearer t0ken"})  # fmt: skip
    capsys.readouterr()
    monkeypatch.setenv("DATADOG_TOKEN", "t0ken")
    assert main(["manifests", "validate", str(tmp_path / "manifests")]) == 0
    assert "auth: alternative 'AuthZ' is used (its variables are set)" in capsys.readouterr().out


async def test_cloudflare_email_and_key_together_or_a_token(tmp_path: Path, http) -> None:
    environ = {"CLOUDFLARE_X_AUTH_EMAIL": "ops@example.com", "CLOUDFLARE_X_AUTH_KEY": "k-123456"}
    api, (_, result), manifest = await _call(
        tmp_path, http, CLOUDFLARE, "cloudflare", environ,
        {"X-Auth-Email": "ops@example.com", "X-Auth-Key": "k-123456"},
    )  # fmt: skip
    assert not result.is_error, result.content
    assert [a["name"] for a in manifest["auth"]["alternatives"]] == ["api_email+api_key",
                                                                      "api_token"]  # fmt: skip
    assert "Authorization" not in api.received[-1].headers
    token_only = {"CLOUDFLARE_TOKEN": "cf-t0ken"}
    _, (_, result), _ = await _call(
        tmp_path, http, CLOUDFLARE, "cloudflare", token_only, {"Authorization": "Bearer cf-t0ken"}
    )
    assert not result.is_error, result.content


async def test_stripe_basic_auth_takes_the_key_without_a_password(tmp_path: Path, http) -> None:
    expected = "Basic " + base64.b64encode(b"sk_test_123456:").decode()
    api, (tool, result), manifest = await _call(
        tmp_path, http, STRIPE, "stripe", {"STRIPE_USERNAME": "sk_test_123456"},
        {"Authorization": expected}, q="sk_test_123456",
    )  # fmt: skip
    assert not result.is_error, result.content
    assert manifest["auth"]["alternatives"][0]["all_of"][0]["password_optional"] is True
    assert "sk_test_123456" not in result.content  # the user name is the secret here
    assert "sk_test_123456" in tool.secret_values()
    _, (_, result), _ = await _call(
        tmp_path, http, STRIPE, "stripe", {"STRIPE_TOKEN": "sk_test_9"},
        {"Authorization": "Bearer sk_test_9"},
    )  # fmt: skip
    assert not result.is_error, result.content


async def test_kubernetes_bearer_token_gets_its_prefix(tmp_path: Path, http) -> None:
    _, (_, result), manifest = await _call(
        tmp_path, http, KUBERNETES, "k8s", {"K8S_API_KEY": "eyJhbGci"},
        {"Authorization": "Bearer eyJhbGci"},
    )  # fmt: skip
    assert manifest["auth"] == {"type": "header", "header": "authorization",
                                "value_env": "K8S_API_KEY", "prefix": "Bearer "}  # fmt: skip
    assert not result.is_error, result.content
    assert json.loads(result.content)["query"] == {"q": "x"}
