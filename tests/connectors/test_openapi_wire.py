"""What an imported connector puts on the wire: OpenAPI parameter styles and media types.

Every case goes the user's way: `chatops manifests import-openapi`, the manifests loaded, the
tool called, and the request read by `OpenApiMock`, which records it raw and checks it with
openapi-core. The expected strings are the OpenAPI 3.1.1 specification's "Style Examples"
table (Parameter Object), copied as published.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from connectors.connector_set import ConnectorSet
from connectors.param_styles import expand_path, expand_query
from tests.fakes.openapi_mock import OpenApiMock
from tests.fakes.serving import started

VALUES: dict[str, Any] = {
    "empty": "",
    "string": "blue",
    "array": ["blue", "black", "brown"],
    "object": {"R": 100, "G": 200, "B": 150},
}
SCHEMAS: dict[str, Any] = {
    "empty": {"type": "string"},
    "string": {"type": "string"},
    "array": {"type": "array", "items": {"type": "string"}},
    "object": {"type": "object", "properties": {k: {"type": "integer"} for k in "RGB"}},
}
# OpenAPI 3.1.1, Parameter Object, "Style Examples": (style, explode) -> kind -> serialised;
# the query styles' `?` prefix left out, n/a cells left out
STYLE_EXAMPLES: dict[tuple[str, bool], dict[str, str]] = {
    ("matrix", False): {"empty": ";color", "string": ";color=blue",
                        "array": ";color=blue,black,brown", "object": ";color=R,100,G,200,B,150"},
    ("matrix", True): {"empty": ";color", "string": ";color=blue",
                       "array": ";color=blue;color=black;color=brown",
                       "object": ";R=100;G=200;B=150"},
    ("label", False): {"empty": ".", "string": ".blue", "array": ".blue,black,brown",
                       "object": ".R,100,G,200,B,150"},
    ("label", True): {"empty": ".", "string": ".blue", "array": ".blue.black.brown",
                      "object": ".R=100.G=200.B=150"},
    ("simple", False): {"empty": "", "string": "blue", "array": "blue,black,brown",
                        "object": "R,100,G,200,B,150"},
    ("simple", True): {"empty": "", "string": "blue", "array": "blue,black,brown",
                       "object": "R=100,G=200,B=150"},
    ("form", False): {"empty": "color=", "string": "color=blue",
                      "array": "color=blue,black,brown", "object": "color=R,100,G,200,B,150"},
    ("form", True): {"empty": "color=", "string": "color=blue",
                     "array": "color=blue&color=black&color=brown", "object": "R=100&G=200&B=150"},
    ("spaceDelimited", False): {"array": "color=blue%20black%20brown",
                                "object": "color=R%20100%20G%20200%20B%20150"},
    ("pipeDelimited", False): {"array": "color=blue%7Cblack%7Cbrown",
                               "object": "color=R%7C100%7CG%7C200%7CB%7C150"},
    ("deepObject", True): {"object": "color%5BR%5D=100&color%5BG%5D=200&color%5BB%5D=150"},
}  # fmt: skip
PATH_STYLES = {"matrix", "label", "simple"}
CASES = [
    (style, explode, kind, expected)
    for (style, explode), row in STYLE_EXAMPLES.items()
    for kind, expected in row.items()
]
# openapi-core 0.23 cannot read these (see tests/fakes/openapi_mock.py): the table alone
NOT_VALIDATED = {("spaceDelimited", False), ("label", False), ("label", True),
                 ("matrix", False), ("matrix", True)}  # fmt: skip
FORM_OBJECT = ("form", True, "object")  # exploded: openapi-core reads it from one query value


@pytest.mark.parametrize(("style", "explode", "kind", "expected"), CASES)
def test_each_style_serialises_as_the_specification_table_says(
    style: str, explode: bool, kind: str, expected: str
) -> None:
    value = VALUES[kind]
    if style in PATH_STYLES:
        assert expand_path("color", value, style, explode) == expected
    else:
        assert "&".join(expand_query("color", value, style, explode)) == expected


def _operation_id(style: str, explode: bool, kind: str) -> str:
    return f"{style.lower()}_{'x' if explode else 'n'}_{kind}"


def _path(style: str, explode: bool, kind: str) -> str:
    base = f"/{'p' if style in PATH_STYLES else 'q'}/{_operation_id(style, explode, kind)}"
    return base + "/{color}" if style in PATH_STYLES else base


def styles_spec() -> dict[str, Any]:
    """One operation per cell of the table."""
    paths: dict[str, Any] = {}
    for style, explode, kind, _ in CASES:
        parameter: dict[str, Any] = {
            "name": "color",
            "in": "path" if style in PATH_STYLES else "query",
            "required": True,
            "style": style,
            "explode": explode,
            "schema": SCHEMAS[kind],
        }
        if kind == "empty":  # the table's empty value: openapi-core refuses it otherwise
            parameter["allowEmptyValue"] = True
        paths[_path(style, explode, kind)] = {
            "get": {
                "operationId": _operation_id(style, explode, kind),
                "parameters": [parameter],
                "responses": {"200": {"description": "ok"}},
            }
        }
    return {"openapi": "3.0.3", "info": {"title": "Styles", "version": "1"}, "paths": paths}


def import_spec(tmp_path: Path, spec: dict[str, Any], name: str, base_url: str) -> Path:
    """`chatops manifests import-openapi` into tmp_path/manifests; returns that directory."""
    source = tmp_path / f"{name}.json"
    source.write_text(json.dumps(spec), encoding="utf-8")
    directory = tmp_path / "manifests"
    directory.mkdir(exist_ok=True)
    code = main(["manifests", "import-openapi", str(source), "--name", name,
                 "--base-url", base_url, "--out", str(directory / f"{name}.yaml")])  # fmt: skip
    assert code == 0
    return directory


@pytest.fixture
async def styles_api() -> AsyncIterator[OpenApiMock]:
    skip = frozenset(
        _path(style, explode, kind).replace("/{color}", "")
        for style, explode, kind, _ in CASES
        if (style, explode) in NOT_VALIDATED or (style, explode, kind) == FORM_OBJECT
    )
    mock = OpenApiMock(styles_spec(), skip_validation=skip)
    async with started(mock) as api:
        yield api


async def test_imported_styles_reach_the_wire_as_the_table_says(
    tmp_path: Path, http, styles_api: OpenApiMock, capsys
) -> None:
    directory = import_spec(tmp_path, styles_spec(), "styles", styles_api.url)
    assert "sent as JSON" not in capsys.readouterr().err
    connectors = await ConnectorSet.load(directory, http=http, environ={})
    for style, explode, kind, expected in CASES:
        tool = connectors.tools.get(f"styles__{_operation_id(style, explode, kind)}")
        assert tool is not None
        result = await tool.invoke({"color": VALUES[kind]})
        if style in PATH_STYLES and kind == "empty":
            assert result.is_error and "empty" in result.content
            continue
        assert not result.is_error, (style, explode, kind, result.content)
        got = styles_api.received[-1]
        sent = got.raw_path.rsplit("/", 1)[-1] if style in PATH_STYLES else got.raw_query
        assert sent == expected, (style, explode, kind)
        assert got.errors == ()
        skipped = (style, explode) in NOT_VALIDATED or (style, explode, kind) == FORM_OBJECT
        assert got.validated is not skipped  # openapi-core read it, and found no fault


def _form_operation(operation_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A Stripe operation: a form body, every object or list field encoded as deepObject."""
    deep = {"explode": True, "style": "deepObject"}
    encoding = {
        name: deep for name, field in fields.items() if field.get("type") in ("object", "array")
    }
    media = {"encoding": encoding, "schema": {"type": "object", "properties": fields}}
    return {
        "operationId": operation_id,
        "requestBody": {"content": {"application/x-www-form-urlencoded": media}},
        "responses": {"200": {"description": "ok"}},
    }


def stripe_like_spec() -> dict[str, Any]:
    """Stripe's shape: a form body whose `encoding` declares deepObject fields (metadata, an
    address, expand), a GET with a deepObject query, Asana's `opt_fields` (explode: false)."""
    address = {"type": "object", "properties": {"city": {"type": "string"},
                                                "line1": {"type": "string"}}}  # fmt: skip
    return {
        "openapi": "3.0.0",
        "info": {"title": "Stripe-like", "version": "1"},
        "paths": {
            "/v1/customers": {
                "post": _form_operation(
                    "PostCustomers",
                    {
                        "address": address,
                        "email": {"type": "string"},
                        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                    },
                )
            },
            "/v1/customers/{customer}": {
                "parameters": [
                    {
                        "name": "customer",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "post": _form_operation(
                    "PostCustomersCustomer",
                    {
                        "expand": {"type": "array", "items": {"type": "string"}},
                    },
                ),
            },
            "/projects": {
                "get": {
                    "operationId": "getProjects",
                    "parameters": [
                        {
                            "name": "opt_fields",
                            "in": "query",
                            "explode": False,
                            "schema": {"type": "array", "items": {"type": "string"}},
                        },
                        {
                            "name": "filter",
                            "in": "query",
                            "style": "deepObject",
                            "explode": True,
                            "schema": {
                                "type": "object",
                                "properties": {"team": {"type": "string"}},
                            },
                        },
                        {
                            "name": "path",
                            "in": "query",
                            "allowReserved": True,
                            "schema": {"type": "string"},
                        },
                    ],  # fmt: skip
                    "responses": {"200": {"description": "ok"}},
                }
            },
        },
    }


async def test_form_body_encoding_and_query_styles_as_stripe_and_asana_expect(
    tmp_path: Path, http
) -> None:
    spec = stripe_like_spec()
    async with started(OpenApiMock(spec)) as api:
        directory = import_spec(tmp_path, spec, "stripe", api.url)
        manifest = yaml.safe_load((directory / "stripe.yaml").read_text())
        create = next(a for a in manifest["actions"] if a["name"] == "post_customers")
        assert create["styles"]["metadata"] == {"style": "deepObject", "explode": True}
        connectors = await ConnectorSet.load(directory, http=http, environ={})
        customers = connectors.tools.get("stripe__post_customers")
        projects = connectors.tools.get("stripe__get_projects")
        customer = connectors.tools.get("stripe__post_customers_customer")
        assert customers is not None and projects is not None and customer is not None
        args = {
            "email": "a+b@example.com",
            "metadata": {"team": "ops"},
            "address": {"city": "Paris", "line1": "1 rue de l'Église"},
        }
        result = await customers.invoke(args)
        assert not result.is_error, result.content
        sent = api.received[-1]
        assert sent.content_type == "application/x-www-form-urlencoded"
        assert sent.body.decode().split("&") == [
            "email=a%2Bb%40example.com",
            "metadata%5Bteam%5D=ops",
            "address%5Bcity%5D=Paris",
            "address%5Bline1%5D=1%20rue%20de%20l%27%C3%89glise",
        ]
        assert sent.validated and json.loads(result.content)["body"] == args
        # a list under deepObject is undefined by OpenAPI (openapi-core refuses to read it);
        # Stripe reads `expand[]=a` as the list [a]: checked on the wire alone
        api.skip_validation = frozenset({"/v1/customers/cus_1"})
        result = await customer.invoke({"customer": "cus_1", "expand": ["sources", "tax"]})
        assert not result.is_error, result.content
        assert api.received[-1].body == b"expand%5B%5D=sources&expand%5B%5D=tax"
        result = await projects.invoke(
            {"opt_fields": ["name", "owner.name"], "filter": {"team": "ops"}, "path": "a/b:c,d"}
        )
        assert not result.is_error, result.content
        got = api.received[-1]
        assert got.raw_query == "opt_fields=name,owner.name&filter%5Bteam%5D=ops&path=a/b:c,d"
        assert got.errors == ()
        assert json.loads(result.content)["query"] == {
            "opt_fields": ["name", "owner.name"], "filter": {"team": "ops"}, "path": "a/b:c,d"
        }  # fmt: skip


def kubernetes_like_spec() -> dict[str, Any]:
    """Kubernetes' PATCH: only the patch media types, none of them application/json."""
    patch = {"type": "object", "description": "Patch is provided to give a concrete name"}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes-like", "version": "1"},
        "paths": {
            "/api/v1/namespaces/{namespace}/pods/{name}": {
                "parameters": [
                    {
                        "name": "namespace",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                ],  # fmt: skip
                "patch": {
                    "operationId": "patchCoreV1NamespacedPod",
                    "requestBody": {
                        "required": True,
                        "content": {
                            media: {"schema": patch}
                            for media in (
                                "application/json-patch+json",
                                "application/merge-patch+json",
                                "application/strategic-merge-patch+json",
                                "application/apply-patch+yaml",
                            )
                        },
                    },
                    "responses": {"200": {"description": "ok"}},
                },
            }
        },
    }


async def test_a_patch_is_sent_with_the_media_type_the_operation_takes(
    tmp_path: Path, http
) -> None:
    spec = kubernetes_like_spec()
    async with started(OpenApiMock(spec)) as api:
        directory = import_spec(tmp_path, spec, "k8s", api.url)
        action = yaml.safe_load((directory / "k8s.yaml").read_text())["actions"][0]
        assert action["content_type"] == "application/merge-patch+json"
        assert "application/merge-patch+json" in action["description"]
        connectors = await ConnectorSet.load(directory, http=http, environ={})
        tool = connectors.tools.get("k8s__patch_core_v1_namespaced_pod")
        assert tool is not None
        args = {"namespace": "default", "name": "web", "body": {"metadata": {"labels": {"a": "b"}}}}
        result = await tool.invoke(args)
        assert not result.is_error, result.content
        sent = api.received[-1]
        assert sent.content_type == "application/merge-patch+json"
        assert json.loads(sent.body) == {"metadata": {"labels": {"a": "b"}}}
        assert sent.errors == ()


async def test_a_text_json_body_is_imported_and_sent_as_text_json(tmp_path: Path, http) -> None:
    """Datadog's metric submission (`POST /api/v1/series`) declares only `text/json`: it was
    skipped as a body "that cannot be sent"; it is JSON, sent with the type the API named."""
    metrics = {
        "type": "object",
        "required": ["series"],
        "properties": {"series": {"type": "array", "items": {"type": "object"}}},
    }
    spec = {
        "openapi": "3.0.0",
        "info": {"title": "Datadog-like", "version": "1"},
        "paths": {
            "/api/v1/series": {
                "post": {
                    "operationId": "SubmitMetrics",
                    "requestBody": {
                        "required": True,
                        "content": {"text/json": {"schema": metrics}},
                    },
                    "responses": {"202": {"description": "accepted"}},
                }
            }
        },
    }
    async with started(OpenApiMock(spec)) as api:
        directory = import_spec(tmp_path, spec, "dd", api.url)
        action = yaml.safe_load((directory / "dd.yaml").read_text())["actions"][0]
        assert action["content_type"] == "text/json"
        connectors = await ConnectorSet.load(directory, http=http, environ={})
        tool = connectors.tools.get("dd__submit_metrics")
        assert tool is not None
        series = [{"metric": "chatops.test", "points": [[1700000000, 1.5]]}]
        result = await tool.invoke({"series": series})
        assert not result.is_error, result.content
        sent = api.received[-1]
        assert sent.content_type == "text/json"
        assert json.loads(sent.body) == {"series": series}
        assert sent.errors == ()
