"""HTTP and MCP connectors against hostile or broken upstreams and arguments: a credential the
upstream echoes in any encoding, a secret at the cut point, an endless body, arguments the
schema does not name, an empty path argument."""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from yarl import URL

from bot.approvals.schema import ApprovalPolicy, policy_metadata
from bot.engine.agent import ReActAgent
from bot.engine.hooks import HookRegistry
from bot.engine.tools import Tool, ToolRegistry, ToolResult
from connectors.connector_set import ConnectorSet
from hooks.guards import TruncateResultGuard
from tests.connectors.conftest import MCP_SERVER_SCRIPT, http_manifest, write_manifest
from tests.connectors.test_http import action, call, load
from tests.fakes.fixtures import make_llm
from tests.fakes.http_api import FakeHttpApi
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call

# '/', '+', '=' and a space: yarl keeps '/', encodes '+' and '=', turns ' ' into '+'
QUERY_SECRET = "k/ey+va=lue/Z9 x"
SECRET = "s3cr3t-T0ken-value"


def pieces(secret: str, size: int = 6) -> list[str]:
    """Every run of `size` characters of the secret: none of them may show."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def assert_no_piece(text: str, secret: str) -> None:
    leaked = [p for p in pieces(secret) if p in text]
    assert not leaked, f"pieces of the secret leaked: {leaked} in {text!r}"


def query_manifest(url: str, *actions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    auth = {"type": "query", "param": "key", "value_env": "TOK"}
    return http_manifest(url, *actions, auth=auth, retries=0, **extra)


async def test_a_query_credential_echoed_in_the_url_is_redacted_in_every_encoding(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    """yarl sends `k/ey%2Bva%3Dlue/Z9+x`; a 404 page repeating the URL must not show it."""
    fake_api.route("GET", "/missing", status=404, text="No route for ", echo_path=True)
    manifest = query_manifest(fake_api.url, action("lookup", "GET", "/missing"))
    connectors = await load(tmp_path, http, manifest, {"TOK": QUERY_SECRET})
    result = await call(connectors, "api__lookup", {})
    sent = fake_api.calls("/missing")[0]
    assert sent.query == [("key", QUERY_SECRET)]  # the credential did go out
    assert result.is_error and "HTTP 404" in result.content
    assert "key=[REDACTED]" in result.content
    yarl_form = URL.build(query={"k": QUERY_SECRET}).raw_query_string.removeprefix("k=")
    for form in (QUERY_SECRET, yarl_form, quote(QUERY_SECRET, safe=""), quote_plus(QUERY_SECRET)):
        assert form not in result.content
    assert sent.raw_path.split("key=")[1] not in result.content
    assert_no_piece(result.content, QUERY_SECRET)


async def test_the_auth_parameter_is_redacted_by_name_whatever_its_value(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    """An upstream that re-encodes the value its own way (`%2f`, `%252B`) still shows the
    parameter's name: the value after it is hidden."""
    echo = "redirect to http://upstream/p?a=1&key=k%2fey%252Bva&b=2 or next=%3Fkey%3Dk%2Fey%26z"
    fake_api.route("GET", "/odd", status=500, text=echo)
    manifest = query_manifest(fake_api.url, action("odd", "GET", "/odd"))
    connectors = await load(tmp_path, http, manifest, {"TOK": QUERY_SECRET})
    result = await call(connectors, "api__odd", {})
    assert "&key=[REDACTED]&b=2" in result.content
    assert "%3Fkey%3D[REDACTED]%26z" in result.content
    assert "k%2fey" not in result.content and "k%2Fey" not in result.content


@pytest.mark.parametrize("offset", [3, 9, 15])
async def test_a_secret_at_the_cut_point_is_redacted_before_the_cut(
    tmp_path, http, fake_api: FakeHttpApi, offset: int
) -> None:
    """`result.max_chars: 100`: the secret starts just before the cut, so cutting first would
    leave its first characters unrecognisable to the redactor."""
    marker = len("\n...[truncated: showing 100 of 999 characters]")
    body = "x" * (100 - marker - offset) + SECRET + " tail" * 200
    fake_api.route("GET", "/data", text=body, headers={"Content-Type": "text/plain"})
    manifest = http_manifest(
        fake_api.url, action("data", "GET", "/data", result={"max_chars": 100}),
        auth={"type": "bearer", "token_env": "TOK"},
    )  # fmt: skip
    connectors = await load(tmp_path, http, manifest, {"TOK": SECRET})
    result = await call(connectors, "api__data", {})
    assert "[truncated" in result.content
    assert_no_piece(result.content, SECRET)


async def test_an_mcp_result_is_redacted_before_it_is_cut(tmp_path, http) -> None:
    token = "mcp-t0ken-d0-not-leak"
    manifest = {
        "name": "fake", "type": "mcp", "command": [sys.executable, str(MCP_SERVER_SCRIPT)],
        "env": {"FAKE_MCP_TOKEN": "CHATOPS_TEST_MCP_TOKEN"}, "result": {"max_chars": 100},
    }  # fmt: skip
    write_manifest(tmp_path / "m", manifest)
    async with await ConnectorSet.load(
        tmp_path / "m", http=http, environ={"CHATOPS_TEST_MCP_TOKEN": token}
    ) as connectors:
        tool = connectors.tools.get("fake__echo")
        assert tool is not None
        marker = len("\n...[truncated: showing 100 of 999 characters]")
        text = "y" * (100 - marker - len("echo: ") - 8) + token + " more" * 100
        result = await tool.invoke({"text": text})
    assert "[truncated" in result.content
    assert_no_piece(result.content, token)


async def test_the_result_guard_redacts_before_it_cuts(fake_openai: FakeOpenAI) -> None:
    """CHATOPS_TOOL_RESULT_MAX_CHARS cuts what any tool returns, a built-in one too, which may
    not redact by itself: the guard redacts with the tool's secrets before cutting."""

    async def leaky(args: dict[str, Any]) -> ToolResult:
        return ToolResult("z" * 90 + SECRET + " end" * 50)

    tool = Tool(
        name="raw__dump",
        description="dump",
        parameters={"type": "object"},
        invoke=leaky,
        metadata=policy_metadata(ApprovalPolicy(approval="never")),
        secret_values=lambda: [SECRET],
    )
    hooks = HookRegistry()
    hooks.add_post(TruncateResultGuard(max_chars=100), name="truncate_result")
    fake_openai.script(tool_call("raw__dump", {}), answer("dumped"))
    llm = make_llm(fake_openai)
    try:
        result = await ReActAgent(llm, ToolRegistry([tool]), hooks=hooks).run("dump it")
    finally:
        await llm.close()
    assert result.answer == "dumped"
    seen = [m["content"] for m in fake_openai.messages(1) if m["role"] == "tool"][0]
    assert "more characters cut" in seen
    assert_no_piece(seen, SECRET)
    assert_no_piece(result.steps[0].observation, SECRET)


async def test_an_endless_text_body_is_read_only_as_far_as_the_observation_needs(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    """The body never ends: the connector stops reading, hangs up, and says it cut it."""
    fake_api.endless("GET", "/log", chunk="line of log text\n" * 4096, content_type="text/plain")
    manifest = http_manifest(fake_api.url, action("log", "GET", "/log"), timeout_s=60)
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__log", {})
    assert not result.is_error
    assert len(result.content) <= 4000
    assert result.content.startswith("line of log text\n")
    assert result.content.endswith("[truncated: the response was cut after 32384 bytes]")


async def test_an_endless_json_body_stops_at_max_response_bytes(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    fake_api.endless("GET", "/items", chunk='{"id": 1}, ' * 1000, content_type="application/json")
    fake_api.route("GET", "/small", json_body={"items": [{"id": 1, "x": 2}], "more": False})
    manifest = http_manifest(
        fake_api.url,
        action("items", "GET", "/items", result={"pick": ["items.id"]}),
        action("small", "GET", "/small", result={"pick": ["items.id"]}),
        max_response_bytes=65536, timeout_s=60,
    )  # fmt: skip
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__items", {})
    assert not result.is_error
    assert result.content.endswith("[truncated: the response was cut after 65536 bytes]")
    assert await call(connectors, "api__small", {}) == ToolResult('{"items":[{"id":1}]}')


async def test_arguments_the_schema_does_not_name_are_refused(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    params = {"type": "object", "properties": {"status": {"type": "string"}}}
    open_params = {**params, "additionalProperties": True}
    manifest = http_manifest(
        fake_api.url,
        action("list", "GET", "/users", parameters=params),
        action("create", "POST", "/users", parameters=params, approval="never"),
        action("search", "GET", "/search", parameters=open_params),
    )  # fmt: skip
    connectors = await load(tmp_path, http, manifest)
    tool = connectors.tools.get("api__list")
    assert tool is not None and tool.parameters["additionalProperties"] is False
    for name in ("api__list", "api__create"):
        result = await call(connectors, name, {"status": "active", "admin": True})
        assert result.is_error and "Invalid arguments" in result.content
        assert "'admin' was unexpected" in result.content
    assert fake_api.requests == []
    await call(connectors, "api__search", {"q": "x"})  # the manifest opted in
    assert fake_api.calls("/search")[0].query == [("q", "x")]


@pytest.mark.parametrize("schema", [{"type": "string"}, {"type": "string", "minLength": 0}])
async def test_an_empty_path_argument_never_reaches_the_collection_url(
    tmp_path, http, fake_api: FakeHttpApi, schema: dict[str, Any]
) -> None:
    """`DELETE /users/{id}` with `id: ""` would be `DELETE /users/`: refused, nothing sent
    (by the compiled schema, or by the request builder when the schema allows empty strings)."""
    params = {"type": "object", "properties": {"id": schema}, "required": ["id"]}
    manifest = http_manifest(
        fake_api.url, action("delete", "DELETE", "/users/{id}", parameters=params,
                             approval="never"))  # fmt: skip
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__delete", {"id": ""})
    assert result.is_error and "id" in result.content
    assert "empty" in result.content or "too short" in result.content
    assert fake_api.requests == []
    await call(connectors, "api__delete", {"id": "u1"})
    assert [r.path for r in fake_api.requests] == ["/users/u1"]
