"""Swagger 2.0 documents (Kubernetes, the Slack Web API) imported with `chatops manifests
import-openapi`, loaded, and called against `OpenApiMock` built from the converted document
(openapi-core checks each request: parameters, body media type, body schema, security)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl

import yaml

from bot.cli import main
from connectors.connector_set import ConnectorSet
from connectors.openapi_load import load_spec
from tests.fakes.openapi_mock import OpenApiMock
from tests.fakes.serving import started

DATA = Path(__file__).resolve().parents[1] / "data" / "swagger2"


def _import(spec: Path, name: str, directory: Path, base_url: str, capsys) -> tuple[dict, str]:
    directory.mkdir(exist_ok=True)
    out = directory / f"{name}.yaml"
    argv = ["manifests", "import-openapi", str(spec), "--name", name, "--out", str(out)]
    assert main([*argv, "--base-url", base_url]) == 0
    return yaml.safe_load(out.read_text(encoding="utf-8")), capsys.readouterr().err


async def test_kubernetes_swagger_imports_and_its_calls_pass_the_converted_spec(
    tmp_path: Path, http, capsys
) -> None:
    spec = DATA / "kubernetes-configmaps.json"
    mock = OpenApiMock(load_spec(spec), expect_headers={"Authorization": "Bearer k8s-token"})
    async with started(mock) as api:
        manifest, err = _import(spec, "k8s", tmp_path / "m", api.url, capsys)
        assert "converted to OpenAPI 3.0" in err and "imported 5 of 5 operation(s)" in err
        assert "not an OpenAPI" not in err and "warning" not in err
        assert manifest["auth"]["prefix"] == "Bearer "
        actions = {a["name"]: a for a in manifest["actions"]}
        patch = actions["patch_core_v1_namespaced_config_map"]
        assert patch["content_type"] == "application/merge-patch+json"
        create = actions["create_core_v1_namespaced_config_map"]["parameters"]
        assert {"data", "metadata", "namespace", "dryRun"} <= set(create["properties"])
        env = {manifest["auth"]["value_env"]: "k8s-token"}
        tools = (await ConnectorSet.load(tmp_path / "m", http=http, environ=env)).tools

        create_tool = tools.get("k8s__create_core_v1_namespaced_config_map")
        assert create_tool is not None
        arguments = {"namespace": "ops", "metadata": {"name": "app"}, "data": {"mode": "on"}}
        result = await create_tool.invoke({**arguments, "dryRun": "All"})
        assert not result.is_error, result.content
        sent = api.received[-1]
        assert (sent.method, sent.path, sent.raw_query) == (
            "POST", "/api/v1/namespaces/ops/configmaps", "dryRun=All")  # fmt: skip
        assert json.loads(sent.body) == {"metadata": {"name": "app"}, "data": {"mode": "on"}}

        patch_tool = tools.get("k8s__patch_core_v1_namespaced_config_map")
        assert patch_tool is not None
        body = {"data": {"mode": "off"}}
        result = await patch_tool.invoke({"namespace": "ops", "name": "app", "body": body})
        assert not result.is_error, result.content
        sent = api.received[-1]
        assert sent.content_type == "application/merge-patch+json"
        assert json.loads(sent.body) == body

        list_tool = tools.get("k8s__list_core_v1_namespaced_config_map")
        assert list_tool is not None
        result = await list_tool.invoke({"namespace": "ops", "labelSelector": "app=web"})
        assert not result.is_error, result.content
        assert api.received[-1].raw_query == "labelSelector=app%3Dweb"
        assert all(r.validated and r.errors == () for r in api.received)


async def test_slack_web_api_swagger_imports_and_its_forms_pass_the_converted_spec(
    tmp_path: Path, http, capsys
) -> None:
    spec = DATA / "slack-web-api.json"
    mock = OpenApiMock(load_spec(spec), expect_headers={"Authorization": "Bearer xoxb-1"})
    async with started(mock) as api:
        manifest, err = _import(spec, "slack", tmp_path / "m", api.url, capsys)
        assert "imported 3 of 3 operation(s), 0 skipped" in err
        assert manifest["auth"]["type"] == "bearer"
        post = next(a for a in manifest["actions"] if a["name"] == "chat_post_message")
        assert post["body_encoding"] == "form" and post["parameters"]["required"] == ["channel"]
        env = {manifest["auth"]["token_env"]: "xoxb-1"}
        tools = (await ConnectorSet.load(tmp_path / "m", http=http, environ=env)).tools

        post_tool = tools.get("slack__chat_post_message")
        assert post_tool is not None
        refused = await post_tool.invoke({"text": "hi"})  # the form's schema is there
        assert refused.is_error and "channel" in refused.content and api.received == []
        result = await post_tool.invoke({"channel": "C1", "text": "deploy done", "mrkdwn": False})
        assert not result.is_error, result.content
        sent = api.received[-1]
        assert sent.content_type.startswith("application/x-www-form-urlencoded")
        assert dict(parse_qsl(sent.body.decode())) == {
            "channel": "C1", "text": "deploy done", "mrkdwn": "false"}  # fmt: skip

        list_tool = tools.get("slack__conversations_list")
        assert list_tool is not None
        result = await list_tool.invoke({"types": ["public_channel", "im"], "limit": 20})
        assert not result.is_error, result.content
        sent = api.received[-1]
        assert parse_qsl(sent.raw_query) == [("types", "public_channel,im"), ("limit", "20")]
        assert all(r.validated and r.errors == () for r in api.received)
