"""Swagger 2.0 -> OpenAPI 3.0 (`connectors/swagger2.py`): each mapping, and the converted
excerpts of Kubernetes and the Slack Web API accepted by openapi-spec-validator (a validator
nobody here wrote)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate

from connectors.swagger2 import swagger_to_openapi

DATA = Path(__file__).resolve().parents[1] / "data" / "swagger2"


def _doc(**extra: Any) -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": {}, **extra}


def _op(*parameters: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "paths": {
            "/x": {
                "post": {
                    "parameters": list(parameters),
                    "responses": {"200": {"description": "ok"}},
                    **extra,
                }
            }
        }
    }


def _converted_op(notes: list[str] | None = None, **doc: Any) -> dict[str, Any]:
    return swagger_to_openapi(_doc(**doc), notes if notes is not None else [])["paths"]["/x"][
        "post"
    ]


@pytest.mark.parametrize(
    ("fields", "servers"),
    [
        (
            {"host": "slack.com", "basePath": "/api", "schemes": ["https"]},
            [{"url": "https://slack.com/api"}],
        ),
        (
            {"host": "h.test", "schemes": ["http", "https", "ws"]},
            [{"url": "http://h.test"}, {"url": "https://h.test"}],
        ),
        ({"host": "h.test", "basePath": "v2/"}, [{"url": "https://h.test/v2"}]),
        ({"basePath": "/api"}, [{"url": "/api"}]),
        ({}, None),
    ],
)
def test_host_base_path_and_schemes_become_servers(fields: dict, servers: list | None) -> None:
    assert swagger_to_openapi(_doc(**fields), []).get("servers") == servers


def test_definitions_move_to_components_and_every_ref_follows() -> None:
    doc = _doc(
        definitions={
            "Pet": {
                "type": "object",
                "x-nullable": True,
                "discriminator": "kind",
                "properties": {
                    "owner": {"$ref": "#/definitions/Person"},
                    "photo": {"type": "file"},
                    "tags": {"type": "array", "items": {"$ref": "#/definitions/Tag"}},
                },
            },
            "Person": {"type": "object"},
            "Tag": {"type": "string"},
        },
        parameters={"limit": {"name": "limit", "in": "query", "type": "integer"}},
        responses={"NotFound": {"description": "gone", "schema": {"$ref": "#/definitions/Tag"}}},
        **_op({"$ref": "#/parameters/limit"}),
    )
    doc["paths"]["/x"]["post"]["responses"]["404"] = {"$ref": "#/responses/NotFound"}
    out = swagger_to_openapi(doc, [])
    pet = out["components"]["schemas"]["Pet"]
    assert pet["properties"]["owner"] == {"$ref": "#/components/schemas/Person"}
    assert pet["properties"]["tags"]["items"] == {"$ref": "#/components/schemas/Tag"}
    assert pet["properties"]["photo"] == {"type": "string", "format": "binary"}
    assert pet["nullable"] is True and pet["discriminator"] == {"propertyName": "kind"}
    op = out["paths"]["/x"]["post"]
    assert op["parameters"] == [{"$ref": "#/components/parameters/limit"}]
    assert out["components"]["parameters"]["limit"] == {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer"},
    }
    assert op["responses"]["404"] == {"$ref": "#/components/responses/NotFound"}
    found = out["components"]["responses"]["NotFound"]["content"]["application/json"]
    assert found == {"schema": {"$ref": "#/components/schemas/Tag"}}


def test_a_body_parameter_becomes_a_request_body_per_consumed_media_type() -> None:
    body = {
        "name": "body",
        "in": "body",
        "required": True,
        "description": "the patch",
        "schema": {"$ref": "#/definitions/Patch"},
    }
    op = _converted_op(
        consumes=["application/json"],
        **_op(body, consumes=["application/merge-patch+json", "application/json-patch+json"]),
    )
    assert "parameters" not in op
    assert op["requestBody"] == {
        "required": True,
        "description": "the patch",
        "content": {
            "application/merge-patch+json": {"schema": {"$ref": "#/components/schemas/Patch"}},
            "application/json-patch+json": {"schema": {"$ref": "#/components/schemas/Patch"}},
        },
    }
    # no `consumes` anywhere: JSON; a global body parameter referenced is inlined
    doc = _doc(parameters={"b": body}, **_op({"$ref": "#/parameters/b"}))
    out = swagger_to_openapi(doc, [])
    assert list(out["paths"]["/x"]["post"]["requestBody"]["content"]) == ["application/json"]
    assert "parameters" not in out.get("components", {})


def test_form_data_becomes_a_form_body_keeping_collection_formats() -> None:
    op = _converted_op(
        consumes=["application/x-www-form-urlencoded", "application/json"],
        **_op(
            {"name": "channel", "in": "formData", "type": "string", "required": True},
            {
                "name": "users",
                "in": "formData",
                "type": "array",
                "items": {"type": "string"},
                "collectionFormat": "multi",
            },
            {"name": "tags", "in": "formData", "type": "array", "items": {"type": "string"}},
            {"name": "token", "in": "query", "type": "string"},
        ),
    )
    assert [p["name"] for p in op["parameters"]] == ["token"]
    body = op["requestBody"]
    assert body["required"] is True and list(body["content"]) == [
        "application/x-www-form-urlencoded"
    ]
    form = body["content"]["application/x-www-form-urlencoded"]
    assert form["schema"]["required"] == ["channel"]
    assert sorted(form["schema"]["properties"]) == ["channel", "tags", "users"]
    assert form["encoding"] == {
        "users": {"style": "form", "explode": True},
        "tags": {"style": "form", "explode": False},
    }


def test_a_file_field_makes_the_form_multipart() -> None:
    op = _converted_op(
        **_op(
            {"name": "file", "in": "formData", "type": "file", "required": True},
            {"name": "title", "in": "formData", "type": "string"},
        )
    )
    media = op["requestBody"]["content"]["multipart/form-data"]
    assert media["schema"]["properties"]["file"] == {"type": "string", "format": "binary"}


@pytest.mark.parametrize(
    ("location", "fmt", "style"),
    [
        ("query", None, {"style": "form", "explode": False}),
        ("query", "csv", {"style": "form", "explode": False}),
        ("query", "multi", {"style": "form", "explode": True}),
        ("query", "ssv", {"style": "spaceDelimited", "explode": False}),
        ("query", "pipes", {"style": "pipeDelimited", "explode": False}),
        ("path", "csv", {"style": "simple", "explode": False}),
        ("header", None, {"style": "simple", "explode": False}),
    ],
)
def test_collection_format_becomes_style_and_explode(
    location: str, fmt: str | None, style: dict
) -> None:
    param = {
        "name": "ids",
        "in": location,
        "type": "array",
        "items": {"type": "integer"},
        "required": True,
    }
    if fmt:
        param["collectionFormat"] = fmt
    notes: list[str] = []
    (converted,) = _converted_op(notes, **_op(param))["parameters"]
    assert {k: converted[k] for k in ("style", "explode")} == style
    assert converted["schema"] == {"type": "array", "items": {"type": "integer"}}
    assert notes == []


def test_tsv_has_no_equivalent_and_says_so() -> None:
    notes: list[str] = []
    param = {
        "name": "ids",
        "in": "query",
        "type": "array",
        "items": {"type": "string"},
        "collectionFormat": "tsv",
    }
    (converted,) = _converted_op(notes, **_op(param))["parameters"]
    assert converted["style"] == "form" and converted["explode"] is False
    assert notes == [
        "#/paths/~1x/post/parameters/0: collectionFormat 'tsv' has no OpenAPI 3 "
        "equivalent here; sent comma-separated"
    ]


def test_produces_gives_each_response_its_content_and_headers_their_schema() -> None:
    doc = _doc(
        produces=["application/json"],
        paths={
            "/x": {
                "get": {
                    "produces": ["application/json", "application/yaml"],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "schema": {"type": "object"},
                            "headers": {"X-Rate": {"type": "integer", "description": "left"}},
                        },
                        "204": {"description": "none"},
                    },
                }
            }
        },
    )
    responses = swagger_to_openapi(doc, [])["paths"]["/x"]["get"]["responses"]
    assert responses["200"]["content"] == {
        "application/json": {"schema": {"type": "object"}},
        "application/yaml": {"schema": {"type": "object"}},
    }
    assert responses["200"]["headers"] == {
        "X-Rate": {"description": "left", "schema": {"type": "integer"}}
    }
    assert responses["204"] == {"description": "none"}


def test_security_definitions_become_security_schemes() -> None:
    definitions = {
        "basic": {"type": "basic"},
        "key": {"type": "apiKey", "name": "X-Key", "in": "header", "description": "the key"},
        "implicit": {
            "type": "oauth2",
            "flow": "implicit",
            "authorizationUrl": "https://a/auth",
            "scopes": {"read": "r"},
        },
        "password": {
            "type": "oauth2",
            "flow": "password",
            "tokenUrl": "https://a/token",
            "scopes": {},
        },
        "application": {"type": "oauth2", "flow": "application", "tokenUrl": "https://a/token"},
        "accessCode": {
            "type": "oauth2",
            "flow": "accessCode",
            "authorizationUrl": "https://a/auth",
            "tokenUrl": "https://a/token",
            "scopes": {"w": "write"},
        },
    }
    out = swagger_to_openapi(_doc(securityDefinitions=definitions, security=[{"basic": []}]), [])
    schemes = out["components"]["securitySchemes"]
    assert schemes["basic"] == {"type": "http", "scheme": "basic"}
    assert schemes["key"] == {
        "type": "apiKey",
        "name": "X-Key",
        "in": "header",
        "description": "the key",
    }
    assert schemes["implicit"]["flows"] == {
        "implicit": {"authorizationUrl": "https://a/auth", "scopes": {"read": "r"}}
    }
    assert schemes["password"]["flows"] == {
        "password": {"tokenUrl": "https://a/token", "scopes": {}}
    }
    assert schemes["application"]["flows"] == {
        "clientCredentials": {"tokenUrl": "https://a/token", "scopes": {}}
    }
    assert schemes["accessCode"]["flows"] == {
        "authorizationCode": {
            "authorizationUrl": "https://a/auth",
            "tokenUrl": "https://a/token",
            "scopes": {"w": "write"},
        }
    }
    assert out["security"] == [{"basic": []}]


@pytest.mark.parametrize("name", ["kubernetes-configmaps.json", "slack-web-api.json"])
def test_the_converted_excerpts_are_valid_openapi_3(name: str) -> None:
    doc = json.loads((DATA / name).read_text(encoding="utf-8"))
    notes: list[str] = []
    converted = swagger_to_openapi(doc, notes)
    validate(converted)  # raises on any fault
    assert notes == []
    assert set(converted["paths"]) == set(doc["paths"])
