"""HTTP actions against a local fake API: auth, mapping, retries, redirects, secrets, results."""

from __future__ import annotations

import asyncio
import base64
import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.approvals.schema import policy_of
from bot.cli import main
from bot.engine.tools import ToolResult
from connectors.connector_set import ConnectorSet
from connectors.manifest import ManifestError
from tests.connectors.conftest import http_manifest, write_manifest
from tests.fakes.http_api import FakeHttpApi

SECRET = "s3cr3t-T0ken-value"


def action(name: str, method: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"{method} {path}", "method": method, "path": path,
            **extra}  # fmt: skip


async def load(
    tmp_path: Path, http: aiohttp.ClientSession, manifest: dict[str, Any],
    environ: dict[str, str] | None = None,
) -> ConnectorSet:  # fmt: skip
    write_manifest(tmp_path / "m", manifest)
    return await ConnectorSet.load(tmp_path / "m", http=http, environ=environ or {})


async def call(connectors: ConnectorSet, name: str, args: dict[str, Any]) -> ToolResult:
    tool = connectors.tools.get(name)
    assert tool is not None, connectors.tools.names()
    return await tool.invoke(args)


@pytest.mark.parametrize(
    ("auth", "env", "header", "expected_header", "query"),
    [
        ({"type": "bearer", "token_env": "TOK"}, {"TOK": SECRET}, "Authorization",
         f"Bearer {SECRET}", None),
        ({"type": "header", "header": "X-Api-Key", "value_env": "TOK"}, {"TOK": SECRET},
         "X-Api-Key", SECRET, None),
        ({"type": "header", "header": "Authorization", "prefix": "Token token=",
          "value_env": "TOK"}, {"TOK": SECRET}, "Authorization", f"Token token={SECRET}", None),
        ({"type": "basic", "username": "bot", "password_env": "TOK"}, {"TOK": SECRET},
         "Authorization", "Basic " + base64.b64encode(f"bot:{SECRET}".encode()).decode(), None),
        ({"type": "basic", "username_env": "USR", "password_env": "TOK"},
         {"USR": "svc", "TOK": SECRET}, "Authorization",
         "Basic " + base64.b64encode(f"svc:{SECRET}".encode()).decode(), None),
        ({"type": "query", "param": "api_key", "value_env": "TOK"}, {"TOK": SECRET}, None, None,
         ("api_key", SECRET)),
        ({"type": "none"}, {}, None, None, None),
    ],
)  # fmt: skip
async def test_each_auth_type_sends_its_credentials(
    tmp_path, http, fake_api: FakeHttpApi, auth, env, header, expected_header, query
) -> None:
    manifest = http_manifest(fake_api.url, action("ping", "GET", "/ping"), auth=auth)
    connectors = await load(tmp_path, http, manifest, env)
    result = await call(connectors, "api__ping", {})
    assert not result.is_error, result.content
    sent = fake_api.calls("/ping")[0]
    if header:
        assert sent.headers[header] == expected_header
    else:
        assert "Authorization" not in sent.headers
    if query:
        assert query in sent.query
    else:
        assert sent.query == []
    assert SECRET not in result.content  # the echo carries the query secret back: redacted


async def test_path_query_and_body_mapping(tmp_path, http, fake_api: FakeHttpApi) -> None:
    props = {"id": {"type": "string"}, "status": {"type": "string"},
             "tags": {"type": "array", "items": {"type": "string"}},
             "limit": {"type": "integer"}, "verbose": {"type": "boolean"},
             "note": {"type": "string"}, "dry_run": {"type": "boolean"}}  # fmt: skip
    params = {"type": "object", "properties": props, "required": ["id"]}
    manifest = http_manifest(
        fake_api.url + "/v2",
        action("get", "GET", "/items/{id}", parameters=params, query={"fields": "all"}),
        action("put", "PUT", "/items/{id}", parameters=params,
               body={"item": {"type": "ref"}, "status": "static"}),
        action("post", "POST", "/items/{id}/notes", parameters=params, query_args=["dry_run"]),
        action("delete", "DELETE", "/items/{id}", parameters=params),
        headers={"Accept": "application/json"},
    )  # fmt: skip
    connectors = await load(tmp_path, http, manifest)

    await call(connectors, "api__get", {"id": "a b/../c", "tags": ["x", "y"], "limit": 5,
                                        "verbose": True})  # fmt: skip
    got = fake_api.requests[-1]
    assert got.method == "GET"
    assert got.raw_path.startswith("/v2/items/a%20b%2F..%2Fc?")  # one segment, no traversal
    assert got.query == [("fields", "all"), ("tags", "x"), ("tags", "y"), ("limit", "5"),
                         ("verbose", "true")]  # fmt: skip
    assert got.body is None
    assert got.headers["Accept"] == "application/json"

    await call(connectors, "api__put", {"id": "7", "status": "open", "note": "n"})
    got = fake_api.requests[-1]
    assert (got.method, got.path, got.query) == ("PUT", "/v2/items/7", [])
    assert got.body == {"item": {"type": "ref"}, "status": "open", "note": "n"}

    await call(connectors, "api__post", {"id": "7", "note": "hello", "dry_run": True})
    got = fake_api.requests[-1]
    assert (got.path, got.query, got.body) == ("/v2/items/7/notes", [("dry_run", "true")],
                                               {"note": "hello"})  # fmt: skip

    await call(connectors, "api__delete", {"id": "..", "status": "gone"})
    got = fake_api.requests[-1]
    assert got.method == "DELETE" and got.raw_path == "/v2/items/%2E%2E?status=gone"
    assert got.body is None


async def test_invalid_arguments_are_an_observation_and_nothing_is_sent(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    params = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    manifest = http_manifest(fake_api.url, action("get", "GET", "/items/{id}", parameters=params))
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__get", {"id": "seven"})
    assert result.is_error
    assert "Invalid arguments for api__get" in result.content
    assert "'seven' is not of type 'integer'" in result.content
    assert fake_api.requests == []
    ok = await call(connectors, "api__get", {"id": 7})
    assert not ok.is_error and fake_api.calls("/items/7")


@pytest.mark.parametrize("status", [503, 429])
async def test_get_is_retried_then_succeeds(tmp_path, http, fake_api: FakeHttpApi, status) -> None:
    fake_api.fail_next("GET", "/flaky", status=status, count=2, headers={"Retry-After": "0"})
    fake_api.route("GET", "/flaky", json_body={"ok": True})
    manifest = http_manifest(fake_api.url, action("flaky", "GET", "/flaky"), retries=2)
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__flaky", {})
    assert result == ToolResult('{"ok":true}')
    assert len(fake_api.calls("/flaky")) == 3


async def test_retry_waits_what_retry_after_says(tmp_path, http, fake_api, caplog) -> None:
    """A 429's Retry-After (0.05 s) wins over the backoff (60 s, capped at 30 s): the call
    completes well inside the bound; ignoring the header would sleep 30 s and time out."""
    fake_api.fail_next("GET", "/limited", status=429, headers={"Retry-After": "0.05"})
    fake_api.route("GET", "/limited", json_body={"ok": True})
    manifest = http_manifest(fake_api.url, action("limited", "GET", "/limited"), retries=1,
                             retry_backoff_s=60)  # fmt: skip
    connectors = await load(tmp_path, http, manifest)
    caplog.set_level(logging.INFO, logger="connectors.http")
    result = await asyncio.wait_for(call(connectors, "api__limited", {}), 10)
    assert result == ToolResult('{"ok":true}')
    assert len(fake_api.calls("/limited")) == 2
    assert "retrying GET /limited in 0.05s" in caplog.text


async def test_retries_give_up_with_the_last_error(tmp_path, http, fake_api: FakeHttpApi) -> None:
    fake_api.fail_next("GET", "/down", status=503, count=5, body="maintenance window")
    manifest = http_manifest(fake_api.url, action("down", "GET", "/down"), retries=1)
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__down", {})
    assert result.is_error
    assert "HTTP 503" in result.content and "maintenance window" in result.content
    assert len(fake_api.calls("/down")) == 2


@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_post_and_patch_are_never_retried(
    tmp_path, http, fake_api: FakeHttpApi, method
) -> None:
    fake_api.fail_next(method, "/create", status=503, headers={"Retry-After": "0"})
    manifest = http_manifest(fake_api.url, action("create", method, "/create"), retries=3)
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__create", {})
    assert result.is_error and "HTTP 503" in result.content
    assert len(fake_api.calls("/create")) == 1


async def test_redirect_to_another_host_is_refused(tmp_path, http, fake_api: FakeHttpApi) -> None:
    fake_api.redirect("GET", "/export", "http://attacker.invalid/collect?x=1")
    manifest = http_manifest(
        fake_api.url, action("export", "GET", "/export"),
        auth={"type": "bearer", "token_env": "TOK"},
    )  # fmt: skip
    connectors = await load(tmp_path, http, manifest, {"TOK": SECRET})
    result = await call(connectors, "api__export", {})
    assert result.is_error
    assert "redirected to another host (attacker.invalid)" in result.content
    assert len(fake_api.requests) == 1


async def test_same_origin_redirect_is_followed(tmp_path, http, fake_api: FakeHttpApi) -> None:
    fake_api.redirect("GET", "/old", "/new?page=2", status=301)
    fake_api.route("GET", "/new", json_body={"moved": True})
    manifest = http_manifest(fake_api.url, action("old", "GET", "/old"))
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__old", {})
    assert result == ToolResult('{"moved":true}')
    assert fake_api.calls("/new")[0].query == [("page", "2")]


async def test_http_errors_become_observations_without_secrets(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    fake_api.route("GET", "/me", status=401,
                   text=f'{{"error": "bad credentials", "seen": "Bearer {SECRET}"}}')  # fmt: skip
    manifest = http_manifest(
        fake_api.url, action("me", "GET", "/me"), auth={"type": "bearer", "token_env": "TOK"}
    )
    connectors = await load(tmp_path, http, manifest, {"TOK": SECRET})
    result = await call(connectors, "api__me", {})
    assert result.is_error
    assert "HTTP 401" in result.content and "bad credentials" in result.content
    assert SECRET not in result.content
    tool = connectors.tools.get("api__me")
    assert tool is not None and SECRET in list(tool.secret_values())


async def test_connection_errors_do_not_leak_query_secrets(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    dead = fake_api.url
    await fake_api.stop()  # nothing listens there any more
    manifest = http_manifest(
        dead, action("ping", "GET", "/ping"),
        auth={"type": "query", "param": "key", "value_env": "TOK"}, retries=0,
    )  # fmt: skip
    connectors = await load(tmp_path, http, manifest, {"TOK": SECRET})
    result = await call(connectors, "api__ping", {})
    assert result.is_error and "request failed" in result.content
    assert SECRET not in result.content


async def test_secret_missing_at_call_time_names_the_variable(
    tmp_path, http, fake_api: FakeHttpApi
) -> None:
    environ = {"TOK": SECRET}
    manifest = http_manifest(
        fake_api.url, action("ping", "GET", "/ping"), auth={"type": "bearer", "token_env": "TOK"}
    )
    connectors = await load(tmp_path, http, manifest, environ)
    environ.clear()  # the variable disappears after start-up
    result = await call(connectors, "api__ping", {})
    assert result.is_error and "TOK is not set" in result.content
    assert fake_api.requests == []


async def test_result_pick_and_max_chars(tmp_path, http, fake_api: FakeHttpApi) -> None:
    incidents = [{"id": f"P{i}", "title": "x" * 50, "service": {"name": "api", "id": "S1"},
                  "noise": list(range(20))} for i in range(40)]  # fmt: skip
    fake_api.route("GET", "/incidents", json_body={"incidents": incidents, "more": False})
    fake_api.route("GET", "/one", json_body={"incident": incidents[0], "other": 1})
    manifest = http_manifest(
        fake_api.url,
        action("one", "GET", "/one", result={"pick": ["incident.id", "incident.service.name"]}),
        action("many", "GET", "/incidents",
               result={"pick": ["incidents.id", "incidents.title"], "max_chars": 500}),
    )  # fmt: skip
    connectors = await load(tmp_path, http, manifest)
    one = await call(connectors, "api__one", {})
    assert one.content == '{"incident":{"id":"P0","service":{"name":"api"}}}'
    many = await call(connectors, "api__many", {})
    assert len(many.content) <= 500
    assert many.content.startswith('{"incidents":[{"id":"P0","title":"xxx')
    assert "noise" not in many.content
    assert many.content.endswith("characters]") and "truncated: showing 500 of" in many.content


async def test_base_url_env_overrides_the_manifest(tmp_path, http, fake_api: FakeHttpApi) -> None:
    manifest = http_manifest(
        "https://api.example.com", action("ping", "GET", "/ping"), base_url_env="API_URL"
    )
    connectors = await load(tmp_path, http, manifest, {"API_URL": fake_api.url})
    result = await call(connectors, "api__ping", {})
    assert not result.is_error and fake_api.calls("/ping")


async def test_a_base_url_env_that_is_not_a_url_fails_the_load(
    tmp_path, http, capsys, monkeypatch
) -> None:
    """`API_URL=localhost:9000` is reported when the manifests load, naming file and variable,
    not at the first call as an error the model cannot fix."""
    manifest = http_manifest("https://api.example.com", action("ping", "GET", "/ping"),
                             base_url_env="API_URL")  # fmt: skip
    with pytest.raises(ManifestError) as info:
        await load(tmp_path, http, manifest, {"API_URL": "localhost:9000"})
    path = tmp_path / "m" / "api.yaml"
    assert f"{path}: environment variable API_URL is not an http(s) URL" in str(info.value)
    monkeypatch.setenv("API_URL", "localhost:9000")
    assert main(["manifests", "validate", str(tmp_path / "m")]) == 0
    assert "note: environment variable API_URL is not an http(s) URL" in capsys.readouterr().out


async def test_approval_policy_comes_from_the_manifest(tmp_path, http, fake_api) -> None:
    manifest = http_manifest(
        fake_api.url,
        action("read", "GET", "/r"),
        action("write", "POST", "/w"),
        action("force", "GET", "/f", approval="required", approvers=["U1", "leads"],
               min_approvals=2, allow_self_approval=False, risk="high", approval_timeout_s=60),
        action("quiet", "DELETE", "/q", approval="never"),
        action("search", "POST", "/s", mutating=False),
        action("trigger", "GET", "/t", mutating=True),
    )  # fmt: skip
    tools = (await load(tmp_path, http, manifest)).tools
    policies = {name: policy_of(tools.get(name)) for name in tools.names()}  # type: ignore[union-attr]
    assert not policies["api__read"].requires_approval and not policies["api__read"].mutating
    assert policies["api__write"].requires_approval and policies["api__write"].mutating
    force = policies["api__force"]
    assert force.requires_approval and force.approvers == ("U1", "leads")
    assert (force.min_approvals, force.allow_self_approval, force.risk, force.timeout_s) == (
        2, False, "high", 60.0)  # fmt: skip
    assert not policies["api__quiet"].requires_approval and policies["api__quiet"].mutating
    # `mutating:` overrides what the method says, and `approval: auto` follows it
    assert not policies["api__search"].requires_approval and not policies["api__search"].mutating
    assert policies["api__trigger"].requires_approval and policies["api__trigger"].mutating
    tool = tools.get("api__force")
    assert tool is not None and (tool.connector, tool.action) == ("api", "force")


async def test_bad_arguments_round_trip_through_the_agent(
    tmp_path, http, fake_api: FakeHttpApi, fake_openai
) -> None:
    """Invalid arguments -> an observation the model reads -> a corrected call that runs."""
    from bot.engine.agent import ReActAgent
    from tests.fakes.fixtures import make_llm
    from tests.fakes.openai_server import answer, tool_call

    params = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    fake_api.route("GET", "/items/7", json_body={"id": 7, "name": "seven"})
    manifest = http_manifest(fake_api.url, action("get", "GET", "/items/{id}", parameters=params))
    connectors = await load(tmp_path, http, manifest)
    fake_openai.script(
        tool_call("api__get", {"id": "seven"}),
        tool_call("api__get", {"id": 7}),
        answer("Item 7 is called seven."),
    )
    llm = make_llm(fake_openai)
    try:
        result = await ReActAgent(llm, connectors.tools).run("what is item 7 called?")
    finally:
        await llm.close()
    assert result.stopped == "answer" and result.answer == "Item 7 is called seven."
    fake_openai.assert_complete()
    first, second = result.steps
    assert first.error and "Invalid arguments for api__get" in first.observation
    assert second.error is None and '"name":"seven"' in second.observation
    tool_messages = [m for m in fake_openai.messages(1) if m["role"] == "tool"]
    assert "'seven' is not of type 'integer'" in tool_messages[0]["content"]
    assert [r.path for r in fake_api.requests] == ["/items/7"]  # the bad call sent nothing


async def test_a_slow_api_times_out_as_an_observation(tmp_path, http, fake_api) -> None:
    fake_api.hang_next("GET", "/slow")
    manifest = http_manifest(fake_api.url, action("slow", "GET", "/slow"), timeout_s=0.2,
                             retries=0)  # fmt: skip
    connectors = await load(tmp_path, http, manifest)
    result = await call(connectors, "api__slow", {})
    assert result == ToolResult.error("api__slow: no answer within 0.2s (timeout).")


async def test_connection_errors_are_retried_for_get_only(tmp_path, http, fake_api) -> None:
    fake_api.disconnect_next("GET", "/r", count=1)
    fake_api.disconnect_next("POST", "/w", count=1)
    manifest = http_manifest(fake_api.url, action("r", "GET", "/r"), action("w", "POST", "/w"))
    connectors = await load(tmp_path, http, manifest)
    read = await call(connectors, "api__r", {})
    assert not read.is_error and len(fake_api.calls("/r")) == 2
    write = await call(connectors, "api__w", {})
    assert write.is_error and "request failed" in write.content
    assert len(fake_api.calls("/w")) == 1
