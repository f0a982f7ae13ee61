"""OpenAPI import: a spec becomes a manifest that validates and whose actions work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bot.approvals.schema import policy_of
from bot.cli import main
from connectors.connector_set import ConnectorSet
from connectors.openapi import manifest_from_openapi
from connectors.openapi_schema import SchemaConverter
from tests.fakes.http_api import FakeHttpApi


def petstore(server_url: str) -> dict:
    """An OpenAPI 3.0 document with local $refs, shared parameters and an API key."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "Pet Store", "version": "1"},
        "servers": [
            {"url": server_url + "/{version}", "variables": {"version": {"default": "v1"}}}
        ],
        "security": [{"key": []}],
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "summary": "List pets",
                    "parameters": [
                        {"$ref": "#/components/parameters/Limit"},
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                    ],
                },
                "post": {
                    "operationId": "createPet",
                    "summary": "Create a pet",
                    "parameters": [
                        {"name": "dry_run", "in": "query", "schema": {"type": "boolean"}}
                    ],
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}
                        }
                    },
                },
            },
            "/pets/{petId}": {
                "parameters": [
                    {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "get": {"operationId": "getPet", "description": "One pet by id"},
                "delete": {"operationId": "deletePet"},
            },
        },
        "components": {
            "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}},
            "parameters": {
                "Limit": {
                    "name": "limit", "in": "query", "description": "page size",
                    "schema": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                }
            },
            "schemas": {
                "NewPet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "id": {"type": "integer", "readOnly": True},
                        "name": {"type": "string"},
                        "tag": {"type": "string", "nullable": True},
                        "owner": {"$ref": "#/components/schemas/Owner"},
                    },
                },
                "Owner": {
                    "type": "object",
                    "properties": {"name": {"type": "string"},
                                   "pets": {"type": "array",
                                            "items": {"$ref": "#/components/schemas/NewPet"}}},
                },
            },
        },
    }  # fmt: skip


async def test_imported_spec_validates_and_its_actions_work(
    tmp_path: Path, http, fake_api: FakeHttpApi, capsys
) -> None:
    spec = tmp_path / "petstore.yaml"
    spec.write_text(yaml.safe_dump(petstore(fake_api.url)))
    out = tmp_path / "manifests" / "petstore.yaml"
    out.parent.mkdir()
    code = main(["manifests", "import-openapi", str(spec), "--name", "petstore", "--out", str(out),
                 "--use-spec-server"])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "wrote" in err and "header parameter 'X-Trace' skipped" in err
    assert main(["manifests", "validate", str(out.parent)]) == 0
    assert "petstore, 4 action(s)" in capsys.readouterr().out

    manifest = yaml.safe_load(out.read_text())
    assert manifest["base_url"] == fake_api.url + "/v1"
    assert manifest["auth"] == {"type": "header", "header": "X-Api-Key",
                                "value_env": "PETSTORE_API_KEY"}  # fmt: skip
    actions = {a["name"]: a for a in manifest["actions"]}
    assert set(actions) == {"list_pets", "create_pet", "get_pet", "delete_pet"}
    assert "approval" not in actions["list_pets"] and "mutating" not in actions["list_pets"]
    assert actions["create_pet"]["approval"] == "auto" and actions["delete_pet"]["risk"] == "high"
    assert actions["create_pet"]["mutating"] is True and actions["delete_pet"]["mutating"] is True
    create = actions["create_pet"]["parameters"]
    assert "id" not in create["properties"]  # readOnly: not sent
    assert create["properties"]["tag"]["type"] == ["string", "null"]
    assert create["required"] == ["name"]
    assert actions["list_pets"]["parameters"]["properties"]["limit"]["exclusiveMinimum"] == 0

    connectors = await ConnectorSet.load(
        out.parent, http=http, environ={"PETSTORE_API_KEY": "k3y-value"}
    )
    tools = connectors.tools
    assert policy_of(tools.get("petstore__delete_pet")).requires_approval  # type: ignore[union-attr]
    assert not policy_of(tools.get("petstore__get_pet")).requires_approval  # type: ignore[union-attr]
    await tools.get("petstore__list_pets").invoke({"limit": 5})  # type: ignore[union-attr]
    await tools.get("petstore__get_pet").invoke({"petId": "p1"})  # type: ignore[union-attr]
    await tools.get("petstore__create_pet").invoke(  # type: ignore[union-attr]
        {"name": "Rex", "tag": None, "dry_run": True}
    )
    await tools.get("petstore__delete_pet").invoke({"petId": "p1"})  # type: ignore[union-attr]
    sent = [(r.method, r.path, r.query, r.body) for r in fake_api.requests]
    assert sent == [
        ("GET", "/v1/pets", [("limit", "5")], None),
        ("GET", "/v1/pets/p1", [], None),
        ("POST", "/v1/pets", [("dry_run", "true")], {"name": "Rex", "tag": None}),
        ("DELETE", "/v1/pets/p1", [], None),
    ]
    assert all(r.headers["X-Api-Key"] == "k3y-value" for r in fake_api.requests)


def test_openapi_31_json_to_stdout_with_placeholder_server(tmp_path: Path, capsys) -> None:
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "Status"},
        "components": {"securitySchemes": {"b": {"type": "http", "scheme": "bearer"}}},
        "paths": {"/v1/health": {"get": {}}, "/v1/health/": {"get": {}}},
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert main(["manifests", "import-openapi", str(path), "--name", "status-api",
                 "--use-spec-server"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    manifest = yaml.safe_load(captured.out)
    assert manifest["base_url"] == "https://api.example.com"
    assert manifest["auth"] == {"type": "bearer", "token_env": "STATUS_API_TOKEN"}
    assert [a["name"] for a in manifest["actions"]] == ["get_v1_health", "get_v1_health_2"]
    assert "no absolute server URL" in captured.err


def test_not_an_openapi_document_is_a_user_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("swagger: '1.2'\n")
    assert main(["manifests", "import-openapi", str(path), "--name", "x", "--use-spec-server"]) == 2
    err = capsys.readouterr().err
    assert "not an OpenAPI 3.x or Swagger 2.0 document" in err and "Traceback" not in err
    assert err.count(str(path)) == 1  # the file is named once


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "integer", "maximum": 5, "exclusiveMaximum": True}, {"type": "integer",
                                                                       "exclusiveMaximum": 5}),
        ({"type": "integer", "maximum": 5, "exclusiveMaximum": False}, {"type": "integer",
                                                                        "maximum": 5}),
        ({"type": "string", "nullable": True}, {"type": ["string", "null"]}),
    ],
)  # fmt: skip
def test_openapi_30_schema_dialect_is_converted(schema, expected) -> None:
    assert SchemaConverter({}).convert(schema, "#") == expected


def test_operation_names_fit_the_64_character_limit() -> None:
    operation = {"operationId": "a" * 80}
    doc = {"openapi": "3.0.0", "servers": [{"url": "https://x.example.com"}],
           "paths": {"/a": {"get": operation, "post": operation}}}  # fmt: skip
    manifest, _ = manifest_from_openapi(doc, "connector")
    names = [f"connector__{a['name']}" for a in manifest["actions"]]
    assert len(set(names)) == 2 and all(len(n) <= 64 for n in names)


def test_undeclared_path_parameters_are_added_with_a_note(tmp_path: Path, capsys) -> None:
    """A spec that uses `{id}` in a path without declaring it still imports, and says so."""
    doc = {
        "openapi": "3.0.0",
        "servers": [{"url": "https://x.example.com"}],
        "paths": {
            "/jobs/{id}/runs/{run}": {
                "get": {
                    "operationId": "getRun",
                    "parameters": [
                        {
                            "name": "run",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer"},
                        }
                    ],
                }
            }
        },
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    code = main(["manifests", "import-openapi", str(path), "--name", "ci", "--use-spec-server"])
    assert code == 0
    captured = capsys.readouterr()
    assert "GET /jobs/{id}/runs/{run}: undeclared path parameter 'id' added" in captured.err
    parameters = yaml.safe_load(captured.out)["actions"][0]["parameters"]
    assert parameters["properties"] == {"run": {"type": "integer"}, "id": {"type": "string"}}
    assert parameters["required"] == ["run", "id"]


def test_import_refuses_to_trust_the_spec_server_without_a_flag(tmp_path: Path, capsys) -> None:
    """The spec's `servers` URL would receive the credentials: the user must choose it."""
    spec = tmp_path / "petstore.yaml"
    spec.write_text(yaml.safe_dump(petstore("https://attacker.example")))
    out = tmp_path / "petstore-manifest.yaml"
    code = main(["manifests", "import-openapi", str(spec), "--name", "petstore", "--out", str(out)])
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "https://attacker.example/v1" in err and "--base-url" in err
    assert "--use-spec-server" in err


async def test_import_with_base_url_sends_credentials_only_there(
    tmp_path: Path, http, fake_api: FakeHttpApi, capsys
) -> None:
    spec = tmp_path / "petstore.yaml"
    spec.write_text(yaml.safe_dump(petstore("https://attacker.example")))
    out = tmp_path / "manifests" / "petstore.yaml"
    out.parent.mkdir()
    code = main(["manifests", "import-openapi", str(spec), "--name", "petstore", "--out", str(out),
                 "--base-url", fake_api.url + "/api/"])  # fmt: skip
    assert code == 0
    assert yaml.safe_load(out.read_text())["base_url"] == fake_api.url + "/api"
    connectors = await ConnectorSet.load(
        out.parent, http=http, environ={"PETSTORE_API_KEY": "k3y-value"}
    )
    await connectors.tools.get("petstore__get_pet").invoke({"petId": "p1"})  # type: ignore[union-attr]
    assert [(r.path, r.headers["X-Api-Key"]) for r in fake_api.requests] == [
        ("/api/pets/p1", "k3y-value")
    ]


def test_import_refuses_a_base_url_that_is_not_http(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "petstore.yaml"
    spec.write_text(yaml.safe_dump(petstore("https://x.example")))
    code = main(["manifests", "import-openapi", str(spec), "--name", "p", "--base-url", "ftp://x"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "base_url" in err


def test_every_non_get_operation_is_imported_as_mutating_and_asks_for_approval(
    tmp_path: Path, capsys
) -> None:
    """A POST that only searches is still marked mutating: the spec cannot prove it safe."""
    operations = {"post": {"operationId": "search"}, "head": {"operationId": "h"},
                  "options": {"operationId": "o"}, "get": {"operationId": "g"}}  # fmt: skip
    doc = {"openapi": "3.0.0", "paths": {"/search": operations}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    code = main(["manifests", "import-openapi", str(path), "--name", "s", "--out",
                 str(manifests / "s.yaml"), "--base-url", "https://api.example.com"])  # fmt: skip
    assert code == 0
    actions = {a["name"]: a for a in yaml.safe_load((manifests / "s.yaml").read_text())["actions"]}
    assert {n: a.get("mutating") for n, a in actions.items()} == {
        "search": True,
        "h": True,
        "o": True,
        "g": None,
    }
    capsys.readouterr()
    assert main(["manifests", "list", str(manifests)]) == 0
    listed = dict(line.split("\t")[::2] for line in capsys.readouterr().out.splitlines())
    assert listed["s__h"].startswith("approval (auto: mutating)")
    assert listed["s__g"].startswith("no approval")


async def test_operation_tags_are_kept_and_reach_the_tools(tmp_path: Path, http) -> None:
    """The selection catalogue groups tools by their first tag: the import keeps every tag
    (whitespace folded, cut to 60 characters, repeats and non-strings dropped)."""
    doc = petstore("http://127.0.0.1:9")
    doc["paths"]["/pets"]["get"]["tags"] = ["Pets", "  Read\nonly ", "Pets", 7, "", "x" * 80]
    manifest, _ = manifest_from_openapi(doc, "petstore", base_url="http://127.0.0.1:9")
    actions = {action["name"]: action for action in manifest["actions"]}
    assert actions["list_pets"]["tags"] == ["Pets", "Read only", "x" * 60]
    assert list(actions["list_pets"])[:3] == ["name", "description", "tags"]
    assert "tags" not in actions["get_pet"]
    out = tmp_path / "petstore.yaml"
    out.write_text(yaml.safe_dump(manifest, sort_keys=False))
    connectors = await ConnectorSet.load(tmp_path, http=http, environ={"PETSTORE_API_KEY": "k"})
    assert connectors.tools.get("petstore__list_pets").tags == ("Pets", "Read only", "x" * 60)  # type: ignore[union-attr]
    assert connectors.tools.get("petstore__get_pet").tags == ()  # type: ignore[union-attr]


def test_a_tag_in_a_manifest_is_checked(tmp_path: Path, capsys) -> None:
    from tests.connectors.conftest import http_manifest, write_manifest

    action = {"name": "a", "description": "A", "path": "/a", "tags": ["ok", ""]}
    write_manifest(tmp_path, http_manifest("http://127.0.0.1:9", action))
    assert main(["manifests", "validate", str(tmp_path)]) != 0
    assert "tags" in capsys.readouterr().err
