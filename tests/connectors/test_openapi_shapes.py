"""`chatops manifests import-openapi` on small documents that each hold one hard case:
JSON Pointers, keywords, composition, collisions, shared references, depth and size limits,
form bodies, names. Each document goes through the CLI; tools built from the output are called
against the fake API where the wire format matters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from bot.cli import main
from connectors.connector_set import ConnectorSet
from connectors.loading import YAML_DUMPER, YAML_LOADER
from connectors.openapi_load import PROGRESS_MIN_BYTES
from connectors.schema_fit import CUT_NOTE, schema_chars
from tests.connectors.conftest import point_manifest_at
from tests.fakes.http_api import FakeHttpApi


def document(paths: dict, schemas: dict | None = None, **extra: Any) -> dict:
    return {
        "openapi": "3.0.3",
        "info": {"title": "Shapes"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": paths,
        "components": {"schemas": schemas or {}, **extra.pop("components", {})},
        **extra,
    }


def json_body(schema: dict, *, required: bool = True) -> dict:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def run_import(tmp_path: Path, doc: dict, capsys, *extra: str) -> tuple[dict, str, Path]:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(doc))
    out = tmp_path / "manifests" / "shapes.yaml"
    out.parent.mkdir(exist_ok=True)
    argv = ["manifests", "import-openapi", str(spec), "--name", "shapes", "--out", str(out)]
    assert main([*argv, "--use-spec-server", *extra]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert main(["manifests", "validate", str(out.parent)]) == 0
    capsys.readouterr()
    return yaml.load(out.read_text(), Loader=YAML_LOADER), err, out


def actions_of(manifest: dict) -> dict[str, dict]:
    return {a["name"]: a for a in manifest["actions"]}


async def load_against(path: Path, url: str, http) -> ConnectorSet:
    point_manifest_at(path, url)
    return await ConnectorSet.load(path.parent, http=http, environ={})


def test_json_pointers_follow_array_indexes_and_escapes(tmp_path: Path, capsys) -> None:
    schemas = {
        "Tag": {"allOf": [{"type": "object", "properties": {"label": {"type": "string"}}}]},
        "a/b": {"type": "string", "enum": ["slash"]},
        "c~d": {"type": "string", "enum": ["tilde"]},
        "e f": {"type": "integer"},
    }
    body = {"type": "object", "properties": {
        "tag": {"$ref": "#/components/schemas/Tag/allOf/0"},
        "slash": {"$ref": "#/components/schemas/a~1b"},
        "tilde": {"$ref": "#/components/schemas/c~0d"},
        "space": {"$ref": "#/components/schemas/e%20f"},
    }}  # fmt: skip
    create = {"operationId": "createTag", "requestBody": json_body(body)}
    doc = document({"/tags": {"post": create}}, schemas)
    manifest, err, _ = run_import(tmp_path, doc, capsys)
    props = actions_of(manifest)["create_tag"]["parameters"]["properties"]
    assert props["tag"]["properties"] == {"label": {"type": "string"}}
    assert props["slash"]["enum"] == ["slash"] and props["tilde"]["enum"] == ["tilde"]
    assert props["space"]["type"] == "integer"


def test_one_bad_operation_is_skipped_with_its_json_path(tmp_path: Path, capsys) -> None:
    doc = document({
        "/good": {"get": {"operationId": "good"}},
        "/bad": {"post": {"operationId": "bad", "requestBody": json_body(
            {"type": "object", "properties": {"x": {"$ref": "#/components/schemas/Missing"}}})}},
        "/remote": {"post": {"operationId": "remote", "requestBody": json_body(
            {"$ref": "other.yaml#/Thing"})}},
    })  # fmt: skip
    manifest, err, _ = run_import(tmp_path, doc, capsys)
    assert list(actions_of(manifest)) == ["good"]
    assert (
        "warning: POST /bad (bad): skipped at #/components/schemas/Missing: "
        "$ref '#/components/schemas/Missing' does not resolve" in err
    )
    assert (
        "warning: POST /remote (remote): skipped at other.yaml#/Thing: "
        "$ref 'other.yaml#/Thing' (other.yaml) cannot be read" in err
    )
    assert "imported 1 of 3 operation(s), 2 skipped" in err


def test_keywords_are_stripped_only_where_they_are_keywords(tmp_path: Path, capsys) -> None:
    """Properties named `xml`, `discriminator`, `nullable`, `externalDocs` are fields; the
    same words as keywords of a schema (and 3.1's `$recursiveAnchor`) are not for a model."""
    schema = {
        "type": "object",
        "xml": {"name": "pet"}, "externalDocs": {"url": "https://x"}, "example": {"a": 1},
        "discriminator": {"propertyName": "kind"}, "$recursiveAnchor": True,
        "x-vendor": 1, "title": "Pet", "deprecated": True,
        "properties": {
            "xml": {"type": "string", "example": "<a/>"},
            "discriminator": {"type": "string", "readOnly": False},
            "nullable": {"type": "boolean", "xml": {"attribute": True}},
            "externalDocs": {"type": "string", "default": {"nullable": True, "xml": 1}},
            "kind": {"type": "string", "nullable": True, "enum": ["a", "b"]},
            "id": {"type": "string", "readOnly": True},
        },
        "required": ["id", "xml"],
    }  # fmt: skip
    doc = document({"/pets": {"post": {"operationId": "addPet", "requestBody": json_body(schema)}}})
    manifest, _, _ = run_import(tmp_path, doc, capsys)
    params = actions_of(manifest)["add_pet"]["parameters"]
    assert list(params["properties"]) == [
        "xml",
        "discriminator",
        "nullable",
        "externalDocs",
        "kind",
    ]
    assert params["properties"]["xml"] == {"type": "string"}
    assert params["properties"]["nullable"] == {"type": "boolean"}
    assert params["properties"]["externalDocs"]["default"] == {"nullable": True, "xml": 1}  # data
    assert params["properties"]["kind"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert params["required"] == ["xml"]  # `id` is readOnly: never sent


def test_composed_bodies_are_merged_or_kept(tmp_path: Path, capsys) -> None:
    schemas = {
        "Base": {"type": "object", "required": ["model"],
                 "properties": {"model": {"type": "string"}, "user": {"type": "string"}}},
        "Owner": {"type": "object", "properties": {"name": {"type": "string"}}},
        "Cat": {"type": "object", "properties": {"meow": {"type": "boolean"}}},
        "Dog": {"type": "object", "properties": {"bark": {"type": "boolean"}}},
    }  # fmt: skip
    merged = {"allOf": [{"$ref": "#/components/schemas/Base"}, {
        "type": "object", "required": ["messages"],
        "properties": {
            "messages": {"type": "array", "items": {"type": "string"}},
            "owner": {"allOf": [{"$ref": "#/components/schemas/Owner"}], "nullable": True,
                      "description": "Who owns it"},
            "pet": {"oneOf": [{"$ref": "#/components/schemas/Cat"},
                              {"$ref": "#/components/schemas/Dog"}]},
            "tags": {"type": "array"},
        }}]}  # fmt: skip
    either = {"anyOf": [{"$ref": "#/components/schemas/Cat"}, {"type": "string"}]}
    doc = document({
        "/chat": {"post": {"operationId": "chat", "requestBody": json_body(merged)}},
        "/pets": {"post": {"operationId": "addPet", "requestBody": json_body(either)}},
    }, schemas)  # fmt: skip
    manifest, _, _ = run_import(tmp_path, doc, capsys)
    actions = actions_of(manifest)
    chat = actions["chat"]["parameters"]
    assert set(chat["properties"]) == {"model", "user", "messages", "owner", "pet", "tags"}
    assert chat["required"] == ["model", "messages"]
    owner = chat["properties"]["owner"]
    assert owner["description"] == "Who owns it"  # beside the $ref, with nullable
    assert owner["anyOf"] == [
        {"type": "object", "properties": {"name": {"type": "string"}}},
        {"type": "null"},
    ]
    assert chat["properties"]["pet"]["oneOf"][0]["properties"] == {"meow": {"type": "boolean"}}
    assert chat["properties"]["tags"] == {"type": "array", "items": {}}  # model APIs need items
    pets = actions["add_pet"]
    assert pets["body_arg"] == "body" and "goes in the `body` argument" in pets["description"]
    assert pets["parameters"]["properties"]["body"]["anyOf"][1] == {"type": "string"}
    assert pets["parameters"]["required"] == ["body"]


async def test_body_fields_named_like_parameters_keep_both(
    tmp_path: Path, capsys, http, fake_api: FakeHttpApi
) -> None:
    body = {
        "type": "object",
        "required": ["limit", "name"],
        "properties": {
            "id": {"type": "string"},
            "limit": {"type": "integer"},
            "name": {"type": "string"},
        },
    }
    op = {"operationId": "renameItem", "requestBody": json_body(body), "parameters": [
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "schema": {"type": "integer"}}]}  # fmt: skip
    manifest, _, path = run_import(tmp_path, document({"/items/{id}": {"put": op}}), capsys)
    action = actions_of(manifest)["rename_item"]
    params = action["parameters"]
    assert set(params["properties"]) == {"id", "limit", "body"}
    assert params["required"] == ["id", "body"]  # the optional query parameter stays optional
    assert "its fields `id`, `limit` share names with parameters" in action["description"]
    connectors = await load_against(path, fake_api.url, http)
    tool = connectors.tools.get("shapes__rename_item")
    assert tool is not None
    result = await tool.invoke({"id": "i1", "limit": 3,
                                "body": {"id": "i2", "limit": 9, "name": "new"}})  # fmt: skip
    assert not result.is_error, result.content
    (sent,) = fake_api.requests
    assert (sent.path, sent.query) == ("/items/i1", [("limit", "3")])
    assert sent.body == {"id": "i2", "limit": 9, "name": "new"}


def test_shared_references_are_defined_once(tmp_path: Path, capsys) -> None:
    """Each level refers to the next twice: inlined, 16 levels are 65,536 copies of the last."""
    levels = 16
    schemas = {
        f"L{i}": {"type": "object", "properties": {
            "left": {"$ref": f"#/components/schemas/L{i + 1}"},
            "right": {"$ref": f"#/components/schemas/L{i + 1}"}}}
        for i in range(levels)
    }  # fmt: skip
    schemas[f"L{levels}"] = {"type": "string", "description": "leaf"}
    doc = document({"/tree": {"post": {"operationId": "plant", "requestBody": json_body(
        {"$ref": "#/components/schemas/L0"})}}}, schemas)  # fmt: skip
    spec_size = len(json.dumps(doc))
    manifest, err, _ = run_import(tmp_path, doc, capsys, "--max-schema-chars", "100000")
    params = actions_of(manifest)["plant"]["parameters"]
    assert params["properties"]["left"] == {"$ref": "#/$defs/L1"}
    assert set(params["$defs"]) == {f"L{i}" for i in range(1, 8)}  # level 8 is cut (default)
    assert params["$defs"]["L7"]["properties"]["left"] == {"type": "object",
                                                           "description": CUT_NOTE}  # fmt: skip
    assert schema_chars(params) < spec_size  # linear in the document, not exponential
    assert "nesting below 8 level(s) omitted" in err


def test_recursive_schemas_and_deep_nesting_are_cut_with_a_note(tmp_path: Path, capsys) -> None:
    deep: dict = {"type": "string"}
    for level in range(12):
        deep = {"type": "object", "description": f"level {level}", "properties": {"next": deep}}
    schemas = {"Node": {"type": "object", "properties": {
        "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
        "name": {"type": "string"}}}}  # fmt: skip
    body = {"type": "object", "properties": {"tree": {"$ref": "#/components/schemas/Node"},
                                             "deep": deep}}  # fmt: skip
    doc = document({"/t": {"post": {"operationId": "t", "requestBody": json_body(body)}}}, schemas)
    manifest, err, _ = run_import(tmp_path, doc, capsys)
    params = actions_of(manifest)["t"]["parameters"]
    assert params["properties"]["tree"] == {"$ref": "#/$defs/Node"}
    node = params["$defs"]["Node"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}  # recursion kept
    level = params["properties"]["deep"]
    for _ in range(7):
        level = level["properties"]["next"]
    assert level["type"] == "object" and "properties" not in level  # depth 8: cut
    assert level["description"] == f"level 4 {CUT_NOTE}"
    assert "nesting below 8 level(s) omitted" in err


def test_each_tool_schema_is_capped_at_the_setting(tmp_path: Path, capsys, monkeypatch) -> None:
    props = {
        f"field_{i}": {
            "type": "object",
            "description": "word " * 60,
            "properties": {"inner": {"type": "string", "enum": [f"v{j}" for j in range(40)]}},
        }
        for i in range(30)
    }
    doc = document({"/big": {"post": {"operationId": "big", "requestBody": json_body(
        {"type": "object", "properties": props})}},
        "/huge": {"get": {"operationId": "huge", "parameters": [
            {"name": f"p{i}" + "x" * 50, "in": "query", "schema": {"type": "string"}}
            for i in range(200)]}},
        "/small": {"get": {"operationId": "small"}}})  # fmt: skip
    monkeypatch.setenv("CHATOPS_TOOL_SCHEMA_MAX_CHARS", "4000")
    manifest, err, _ = run_import(tmp_path, doc, capsys)
    big = actions_of(manifest)["big"]["parameters"]
    assert schema_chars(big) <= 4000 and len(big["properties"]) == 30
    assert (
        "note: POST /big: nesting below 1 level(s) omitted; descriptions and enums shortened "
        "to fit 4000 characters" in err
    )
    assert "warning: GET /huge (huge): skipped at #/paths/~1huge/get: its argument schema" in err
    assert "limit 4000" in err and "imported 2 of 3" in err
    flag, err, _ = run_import(tmp_path, doc, capsys, "--max-schema-chars", "100000")
    assert schema_chars(actions_of(flag)["big"]["parameters"]) > 4000


async def test_form_and_multipart_bodies_are_sent_as_fields(
    tmp_path: Path, capsys, http, fake_api: FakeHttpApi
) -> None:
    fields = {
        "type": "object",
        "required": ["To"],
        "properties": {
            "To": {"type": "string"},
            "Media": {"type": "array", "items": {"type": "string"}},
            "Urgent": {"type": "boolean"},
            "Meta": {"type": "object"},
        },
    }
    with_file = {
        "type": "object",
        "properties": {
            "purpose": {"type": "string"},
            "file": {"type": "string", "format": "binary"},
        },
    }
    needs_file = {
        "type": "object",
        "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary"}},
    }
    doc = document({
        "/messages": {"post": {"operationId": "send", "requestBody": {"content": {
            "application/x-www-form-urlencoded": {"schema": fields}}}}},
        "/notes": {"post": {"operationId": "note", "requestBody": {"content": {
            "multipart/form-data": {"schema": with_file}}}}},
        "/upload": {"post": {"operationId": "upload", "requestBody": {"required": True,
            "content": {"multipart/form-data": {"schema": needs_file}}}}},
        "/raw": {"put": {"operationId": "raw", "requestBody": {"required": True,
            "content": {"application/octet-stream": {"schema": {"type": "string"}}}}}},
    })  # fmt: skip
    manifest, err, path = run_import(tmp_path, doc, capsys)
    actions = actions_of(manifest)
    assert set(actions) == {"send", "note"}
    assert actions["send"]["body_encoding"] == "form"
    assert actions["note"]["body_encoding"] == "multipart"
    assert "file" not in actions["note"]["parameters"]["properties"]
    assert (
        "POST /upload (upload): skipped at" in err and "needs a file upload (field 'file')" in err
    )
    assert "PUT /raw (raw): skipped at #/paths/~1raw/put/requestBody/content: its request " in err
    connectors = await load_against(path, fake_api.url, http)
    send = connectors.tools.get("shapes__send")
    note = connectors.tools.get("shapes__note")
    assert send is not None and note is not None
    sent = await send.invoke({"To": "+1 555", "Media": ["a", "b"], "Urgent": True,
                              "Meta": {"k": "v"}})  # fmt: skip
    noted = await note.invoke({"purpose": "fine-tune & test"})
    assert not sent.is_error and not noted.is_error, (sent.content, noted.content)
    form, multipart = fake_api.requests
    assert form.content_type == "application/x-www-form-urlencoded"
    assert form.body == [("To", "+1 555"), ("Media", "a"), ("Media", "b"), ("Urgent", "true"),
                         ("Meta", '{"k":"v"}')]  # fmt: skip
    assert multipart.content_type == "multipart/form-data"
    assert multipart.body == [("purpose", "fine-tune & test")]


async def test_names_descriptions_headers_and_auth_prefix(
    tmp_path: Path, capsys, http, fake_api: FakeHttpApi
) -> None:
    long_text = "Lists incidents. " + "Incidents are things that happened to services. " * 20
    doc = document(
        {
            "/incidents": {"get": {"operationId": "get-incidents", "description": long_text,
                "parameters": [
                    {"name": "DateSent<", "in": "query", "schema": {"type": "string"}},
                    {"name": "statuses[]", "in": "query",
                     "schema": {"type": "array", "items": {"type": "string"}}},
                    {"name": "Accept", "in": "header", "required": True,
                     "schema": {"type": "string", "default": "application/vnd.x+json"}},
                    {"name": "X-Early", "in": "header", "required": True,
                     "schema": {"type": "string", "enum": ["beta"]}},
                    {"name": "From", "in": "header", "required": True,
                     "schema": {"type": "string", "format": "email"}}]}},
            "/status": {"get": {"operationId": "getHTTPStatus", "summary": "Status"}},
        },
        components={"securitySchemes": {"key": {"type": "apiKey", "in": "header",
            "name": "Authorization",
            "description": "The API Key with format `Token token=<API_KEY>`"}}},
        security=[{"key": []}],
    )  # fmt: skip
    manifest, err, path = run_import(tmp_path, doc, capsys)
    actions = actions_of(manifest)
    assert set(actions) == {"get_incidents", "get_http_status"}
    incidents = actions["get_incidents"]
    text = incidents["description"]
    assert len(text) <= 500 and text.endswith("services…")  # cut between words
    assert set(incidents["parameters"]["properties"]) == {"DateSent_lt", "statuses"}
    assert incidents["wire_names"] == {"DateSent_lt": "DateSent<", "statuses": "statuses[]"}
    headers = {"Accept": "application/vnd.x+json", "X-Early": "beta"}
    assert incidents.get("headers", {}) | manifest["headers"] == headers  # (moved up, or not)
    assert (
        "GET /incidents: required header parameter 'From' is not imported; set it under the "
        "manifest's headers" in err
    )
    assert manifest["auth"]["prefix"] == "Token token="
    data = yaml.load(path.read_text(), Loader=YAML_LOADER)
    data["headers"]["From"] = "oncall@example.com"  # as the note says
    data["base_url"] = fake_api.url
    path.write_text(yaml.dump(data, Dumper=YAML_DUMPER))
    connectors = await ConnectorSet.load(path.parent, http=http, environ={"SHAPES_API_KEY": "k1"})
    tool = connectors.tools.get("shapes__get_incidents")
    assert tool is not None
    assert not (await tool.invoke({"DateSent_lt": "2026-01-01", "statuses": ["a", "b"]})).is_error
    (sent,) = fake_api.requests
    assert sent.query == [("DateSent<", "2026-01-01"), ("statuses[]", "a"), ("statuses[]", "b")]
    assert sent.headers["Authorization"] == "Token token=k1"
    assert sent.headers["X-Early"] == "beta" and sent.headers["From"] == "oncall@example.com"


def test_json_is_read_as_json_and_big_documents_report_progress(tmp_path: Path, capsys) -> None:
    """`1e3` is a number in JSON but a string to a YAML 1.1 parser; padding makes the document
    big enough for progress lines."""
    padding = "x" * (PROGRESS_MIN_BYTES // 200)
    paths = {f"/r{i}": {"get": {"operationId": f"r{i}", "description": padding, "parameters": [
        {"name": "n", "in": "query", "schema": {"type": "number", "maximum": 1000}}]}}
        for i in range(250)}  # fmt: skip
    spec = tmp_path / "spec.json"
    text = json.dumps(document(paths)).replace('"maximum": 1000', '"maximum": 1e3')
    spec.write_text(text)
    out = tmp_path / "m" / "big.yaml"
    out.parent.mkdir()
    argv = ["manifests", "import-openapi", str(spec), "--name", "big", "--out", str(out)]
    assert main([*argv, "--base-url", "https://big.example.com"]) == 0
    err = capsys.readouterr().err
    assert "progress: reading spec.json" in err and "progress: importing 250 operations" in err
    assert "progress:   200 of 250 operations" in err
    manifest = yaml.load(out.read_text(), Loader=YAML_LOADER)
    assert manifest["actions"][0]["parameters"]["properties"]["n"]["maximum"] == 1000.0


def test_libyaml_reads_yaml_when_pyyaml_has_it() -> None:

    if yaml.__with_libyaml__:
        assert YAML_LOADER is yaml.CSafeLoader
    else:
        assert YAML_LOADER is yaml.SafeLoader


def test_a_large_imported_manifest_loads(tmp_path: Path, capsys) -> None:
    """An API with many operations makes a manifest of more YAML values than a hand-written one
    ever has (the loader's alias-bomb bound); without aliases, its size is what bounds it."""
    enum = [f"v{i}" for i in range(800)]
    paths = {
        f"/r{i}": {"get": {"operationId": f"r{i}", "parameters": [
            {"name": "kind", "in": "query", "schema": {"type": "string", "enum": enum}}]}}
        for i in range(300)
    }  # fmt: skip
    manifest, _, path = run_import(tmp_path, document(paths), capsys)  # validates the file too
    assert len(manifest["actions"]) == 300  # 240,000 enum values alone
    assert main(["manifests", "list", str(path.parent)]) == 0


async def test_read_only_fields_are_dropped_under_composition_and_from_required(
    tmp_path: Path, http, fake_api
) -> None:
    """Cloudflare's DNS record create: `required` beside a `oneOf` names fields a member's
    `allOf` base declares read-only; the record must still be sendable."""
    base = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "readOnly": True},
            "created_on": {"$ref": "#/components/schemas/timestamp"},
            "name": {"type": "string"},
            "content": {"type": "string"},
        },
    }
    doc = {
        "openapi": "3.0.3",
        "servers": [{"url": "https://api.example.com"}],
        "paths": {"/zones/{zone}/dns_records": {"post": {
            "operationId": "createRecord",
            "parameters": [{"name": "zone", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/record"}}}},
        }}},
        "components": {"schemas": {
            "timestamp": {"type": "string", "format": "date-time", "readOnly": True},
            "base": base,
            "a_record": {"allOf": [{"$ref": "#/components/schemas/base"},
                                   {"properties": {"type": {"enum": ["A"]}},
                                    "required": ["id", "type"]}]},
            "record": {"required": ["name", "content", "id", "created_on"],
                       "oneOf": [{"$ref": "#/components/schemas/a_record"}]},
        }},
    }  # fmt: skip
    spec = tmp_path / "cloudflare.json"
    spec.write_text(json.dumps(doc))
    out = tmp_path / "manifests" / "cloudflare.yaml"
    out.parent.mkdir()
    assert main(["manifests", "import-openapi", str(spec), "--name", "cloudflare",
                 "--base-url", fake_api.url, "--out", str(out)]) == 0  # fmt: skip
    text = json.dumps(yaml.safe_load(out.read_text())["actions"][0]["parameters"])
    assert "created_on" not in text and '"id"' not in text
    connectors = await ConnectorSet.load(out.parent, http=http, environ={})
    tool = connectors.tools.get("cloudflare__create_record")
    assert tool is not None
    record = {"name": "www", "content": "192.0.2.1", "type": "A"}
    result = await tool.invoke({"zone": "z1", "body": record})
    assert not result.is_error, result.content
    assert [(r.path, r.body) for r in fake_api.requests] == [("/zones/z1/dns_records", record)]
