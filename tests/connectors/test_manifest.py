"""Manifest validation and the `chatops manifests` command (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from bot.cli import main
from connectors.connector_set import ConnectorSet
from connectors.loading import load_manifest_dir
from connectors.manifest import ManifestError
from tests.connectors.conftest import REPO, http_manifest, write_manifest

EXAMPLES = REPO / "manifests"


def get_action(name: str = "list", **extra) -> dict:
    return {"name": name, "description": "list things", "method": "GET", "path": "/things",
            **extra}  # fmt: skip


def errors_for(tmp_path: Path, *manifests: dict) -> str:
    for data in manifests:
        write_manifest(tmp_path / "m", data, filename=f"{data['name']}-{id(data)}.yaml")
    with pytest.raises(ManifestError) as info:
        load_manifest_dir(tmp_path / "m")
    return str(info.value)


def test_unknown_fields_name_file_action_and_field(tmp_path) -> None:
    data = http_manifest("https://api.example.com", get_action(), get_action("bad", methd="GET"))
    data["auth"] = {"type": "bearer", "token_env": "T", "tokn": "x"}
    message = errors_for(tmp_path, data)
    lines = message.splitlines()
    assert any("api-" in line and "field 'auth.tokn': unknown field" in line for line in lines)
    assert any("action 'bad' (actions[1]): field 'methd': unknown field" in line for line in lines)


def test_wrong_values_are_explained(tmp_path) -> None:
    data = http_manifest(
        "https://api.example.com",
        get_action(method="FETCH"),
        get_action("two", approval="maybe", risk="extreme", min_approvals=0),
    )
    message = errors_for(tmp_path, data)
    assert "action 'list' (actions[0]): field 'method'" in message
    assert "action 'two' (actions[1]): field 'approval'" in message
    assert "field 'risk'" in message and "field 'min_approvals'" in message


def test_an_unknown_type_names_the_type_field(tmp_path) -> None:
    grpc = {"name": "g", "type": "grpc", "base_url": "https://a.example.com"}
    assert ": field 'type': Input tag 'grpc'" in errors_for(tmp_path / "a", grpc)
    oauth = http_manifest("https://a.example.com", get_action(), auth={"type": "oauth"})
    assert ": field 'auth.type': Input tag 'oauth'" in errors_for(tmp_path / "b", oauth)
    untyped = http_manifest("https://a.example.com", get_action(), auth={"token_env": "T"})
    assert ": field 'auth.type': Unable to extract tag" in errors_for(tmp_path / "c", untyped)


def test_duplicate_actions_and_connectors_are_rejected(tmp_path) -> None:
    dup_action = http_manifest("https://a.example.com", get_action(), get_action())
    assert "action 'list' (actions[1]): field 'name': duplicate action name" in errors_for(
        tmp_path / "one", dup_action
    )
    first = http_manifest("https://a.example.com", get_action())
    second = http_manifest("https://b.example.com", get_action("other"))
    message = errors_for(tmp_path / "two", first, second)
    assert "connector 'api' is also defined in" in message


def test_tool_names_that_clash_across_connectors_are_rejected(tmp_path, capsys) -> None:
    """`a_` + `_list` and `a` + `__list` both make `a____list`: one registry, one name."""
    write_manifest(tmp_path / "m", http_manifest("https://a.example.com", get_action("_list"),
                                                 name="a_"))  # fmt: skip
    write_manifest(tmp_path / "m", http_manifest("https://b.example.com", get_action("__list"),
                                                 name="a"))  # fmt: skip
    assert main(["manifests", "validate", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert (
        f"a_.yaml: action '_list' (actions[0]): field 'name': tool name 'a____list' is also "
        f"produced by {tmp_path / 'm' / 'a.yaml'}: action '__list' (actions[0])"
    ) in err
    assert "Traceback" not in err


def test_tool_names_must_be_valid_function_names(tmp_path) -> None:
    long_name = http_manifest("https://a.example.com", get_action("x" * 60))
    message = errors_for(tmp_path / "long", long_name)
    assert "is not a valid function name" in message and "at most 64" in message
    dotted = http_manifest("https://a.example.com", get_action("list.all"))
    assert "field 'name'" in errors_for(tmp_path / "dot", dotted)
    bad_connector = {**http_manifest("https://a.example.com", get_action()), "name": "my api"}
    assert "field 'name'" in errors_for(tmp_path / "space", bad_connector)


def test_path_parameters_must_be_declared_and_required(tmp_path) -> None:
    undeclared = http_manifest("https://a.example.com", get_action(path="/things/{id}"))
    assert (
        "action 'list' (actions[0]): field 'parameters': path parameter {id} is not in "
        "parameters.properties"
    ) in errors_for(tmp_path / "a", undeclared)
    optional = http_manifest(
        "https://a.example.com",
        get_action(path="/things/{id}",
                   parameters={"type": "object", "properties": {"id": {"type": "string"}}}),
    )  # fmt: skip
    assert (
        "field 'parameters': path parameter {id} must be listed in parameters.required"
    ) in errors_for(tmp_path / "b", optional)
    not_schema = http_manifest(
        "https://a.example.com", get_action(parameters={"type": "object", "properties": 5})
    )
    assert "not a valid JSON Schema" in errors_for(tmp_path / "c", not_schema)


def test_body_fields_must_name_arguments(tmp_path) -> None:
    params = {"type": "object", "properties": {"payload": {"type": "object"}}}
    data = http_manifest(
        "https://api.example.com",
        get_action("get", body_arg="payload", parameters=params),
        get_action("post", method="POST", body_arg="missing", parameters=params),
        get_action("odd", wire_names={"ghost": "Ghost<"}, body_encoding="xml"),
    )
    message = errors_for(tmp_path, data)
    assert "action 'get' (actions[0]): body_arg needs a method with a body, not GET" in message
    assert "action 'post' (actions[1]): body_arg 'missing' is not in parameters" in message
    assert "action 'odd' (actions[2]): field 'body_encoding'" in message


def test_mcp_manifest_needs_exactly_one_transport(tmp_path) -> None:
    both = {"name": "m", "type": "mcp", "command": ["x"], "url": "http://127.0.0.1:1/mcp"}
    message = errors_for(tmp_path / "a", both)
    assert "m-" in message and ": set exactly one of command (stdio) or url" in message
    assert "Value error" not in message
    rule = {"name": "m", "type": "mcp", "command": ["x"], "tools": [{"match": "*", "risk": "x"}]}
    assert "tool rule '*' (tools[0]): field 'risk'" in errors_for(tmp_path / "b", rule)


def test_invalid_yaml_names_the_line(tmp_path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "broken.yaml").write_text("name: x\nactions: [\n  - a: b\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_dir(tmp_path / "m")
    assert "broken.yaml: invalid YAML (line" in str(info.value)


async def test_missing_secret_is_reported_at_load_naming_file_and_variable(
    tmp_path, http, caplog
) -> None:
    data = http_manifest(
        "https://a.example.com", get_action(), auth={"type": "bearer", "token_env": "API_TOKEN"}
    )
    path = write_manifest(tmp_path / "m", data)
    other = write_manifest(tmp_path / "m", {**data, "name": "open", "auth": {"type": "none"}})
    with pytest.raises(ManifestError) as info:
        await ConnectorSet.load(tmp_path / "m", http=http, environ={}, strict=True)
    assert f"{path}: environment variable API_TOKEN is not set" in str(info.value)

    lenient = await ConnectorSet.load(tmp_path / "m", http=http, environ={})
    assert lenient.tools.names() == ["open__list"]  # the other connector still loads
    assert lenient.skipped == [
        f"{path}: environment variable API_TOKEN is not set (connector 'api' left out)"
    ]
    assert f"{path}: environment variable API_TOKEN is not set" in caplog.text
    assert [p for p, _ in lenient.manifests] == [other]

    loaded = await ConnectorSet.load(tmp_path / "m", http=http, environ={"API_TOKEN": "t0ken"})
    assert loaded.tools.names() == ["api__list", "open__list"] and loaded.skipped == []


def test_examples_validate_against_the_models_and_the_exported_schema(capsys) -> None:
    assert main(["manifests", "validate", str(EXAMPLES)]) == 0
    out = capsys.readouterr().out
    for name in ("github", "pagerduty", "ops"):
        assert f"ok: {EXAMPLES / name}.yaml: {name}" in out
    assert main(["manifests", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    validator = Draft202012Validator(schema)
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert len(files) >= 3
    for path in files:
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert errors == [], (path, errors[:1])
    broken = {"name": "x", "base_url": "https://a.example.com", "actions": [get_action(foo=1)]}
    assert list(validator.iter_errors(broken))


def test_validate_reports_problems_without_a_traceback(tmp_path, capsys) -> None:
    write_manifest(tmp_path / "m", http_manifest("https://a.example.com", get_action(mode=1)))
    assert main(["manifests", "validate", str(tmp_path / "m")]) == 1
    captured = capsys.readouterr()
    assert "error: " in captured.err and "action 'list' (actions[0]): field 'mode'" in captured.err
    assert "Traceback" not in captured.err + captured.out


def test_validate_defaults_to_the_configured_directory(tmp_path, capsys, monkeypatch) -> None:
    write_manifest(tmp_path / "conf", http_manifest("https://a.example.com", get_action()))
    monkeypatch.setenv("CHATOPS_MANIFESTS_DIR", str(tmp_path / "conf"))
    assert main(["manifests", "validate"]) == 0
    assert "api, 1 action(s)" in capsys.readouterr().out
    monkeypatch.setenv("CHATOPS_MANIFESTS_DIR", str(tmp_path / "nowhere"))
    assert main(["manifests", "validate"]) == 1
    assert "not a directory" in capsys.readouterr().err


def test_list_shows_tools_and_their_approval(capsys) -> None:
    assert main(["manifests", "list", str(EXAMPLES)]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_tool = {line.split("\t")[0]: line for line in lines}
    assert "no approval" in by_tool["github__list_issues"]
    assert "approval required, risk high" in by_tool["github__merge_pull_request"]
    assert "approval (auto: mutating)" in by_tool["ops__set_feature_flag"]
    assert "PUT /incidents/{id}" in by_tool["pagerduty__acknowledge"]


def test_manifest_examples_in_the_docs_validate() -> None:
    """The documentation's YAML examples are real manifests (docs must not drift from code)."""
    import re

    from connectors.loading import parse_manifest

    text = (REPO / "docs" / "connectors.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    manifests = [b for b in blocks if isinstance(b, dict) and "name" in b]
    assert len(manifests) >= 3
    for data in manifests:
        parse_manifest(data, source="docs/connectors.md")
