"""Multi-file documents (DigitalOcean's layout) import with their schemas, or say why not.

`tests/data/digitalocean-mini/` is a hand-written excerpt laid out as DigitalOcean's
specification is: operations, parameters, responses and models in their own files, reached by
relative `$ref`s (a path item too). It is imported with `chatops manifests import-openapi`,
loaded, and called against `OpenApiMock`, which checks each request with openapi-core.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from bot.cli import main
from connectors.connector_set import ConnectorSet
from connectors.openapi_load import load_spec
from tests.fakes.openapi_mock import OpenApiMock
from tests.fakes.serving import started

DATA = Path(__file__).resolve().parents[1] / "data" / "digitalocean-mini"
ROOT = DATA / "DigitalOcean-public.v2.yaml"
TOKEN = "dop_v1_secret"


@pytest.fixture
async def do_api() -> AsyncIterator[OpenApiMock]:
    mock = OpenApiMock(load_spec(ROOT), expect_headers={"Authorization": f"Bearer {TOKEN}"})
    async with started(mock) as api:
        yield api


def _import(spec: Path, out: Path, base_url: str, capsys) -> tuple[dict, str]:
    out.parent.mkdir(exist_ok=True)
    argv = ["manifests", "import-openapi", str(spec), "--name", "do", "--out", str(out)]
    assert main([*argv, "--base-url", base_url]) == 0
    return yaml.safe_load(out.read_text(encoding="utf-8")), capsys.readouterr().err


async def test_a_digitalocean_style_document_imports_with_its_schemas_and_calls_right(
    tmp_path: Path, http, do_api: OpenApiMock, capsys
) -> None:
    manifest, err = _import(ROOT, tmp_path / "m" / "do.yaml", do_api.url, capsys)
    assert "imported 4 of 4 operation(s), 0 skipped" in err and "warning" not in err
    actions = {a["name"]: a for a in manifest["actions"]}
    assert set(actions) == {"droplets_list", "droplets_create", "droplets_get", "account_get"}
    listed = actions["droplets_list"]["parameters"]["properties"]
    assert set(listed) == {"per_page", "page", "tag_name"}
    assert listed["per_page"]["maximum"] == 200  # from shared/parameters.yml
    create = actions["droplets_create"]["parameters"]
    assert {"name", "region", "size", "image", "backups", "tags"} <= set(create["properties"])
    assert set(create["required"]) == {"name", "size", "image"}
    assert actions["droplets_get"]["parameters"]["required"] == ["droplet_id"]
    token_env = manifest["auth"]["token_env"]

    connectors = await ConnectorSet.load(tmp_path / "m", http=http, environ={token_env: TOKEN})
    create_tool = connectors.tools.get("do__droplets_create")
    assert create_tool is not None
    assert "name" in create_tool.parameters["properties"]
    refused = await create_tool.invoke({"region": "nyc3"})  # the schema is there: checked
    assert refused.is_error and "name" in refused.content and do_api.received == []
    arguments = {"name": "web-1", "region": "nyc3", "size": "s-1vcpu-1gb",
                 "image": "ubuntu-20-04-x64", "tags": ["env:prod"]}  # fmt: skip
    result = await create_tool.invoke(arguments)
    assert not result.is_error, result.content
    sent = do_api.received[-1]
    assert (sent.method, sent.path, sent.errors) == ("POST", "/v2/droplets", ())
    assert json.loads(sent.body) == arguments
    result = await connectors.tools.get("do__droplets_list").invoke(
        {"per_page": 5, "tag_name": "web"}
    )
    assert not result.is_error, result.content
    assert do_api.received[-1].raw_query == "per_page=5&tag_name=web"
    result = await connectors.tools.get("do__droplets_get").invoke({"droplet_id": 3164444})
    assert not result.is_error and do_api.received[-1].path == "/v2/droplets/3164444"
    assert not (await connectors.tools.get("do__account_get").invoke({})).is_error
    assert all(r.validated and r.errors == () for r in do_api.received)


def _write(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _operation(op_id: str, schema_ref: str) -> str:
    return (
        f"operationId: {op_id}\nrequestBody:\n  required: true\n  content:\n"
        f"    application/json:\n      schema:\n        $ref: '{schema_ref}'\n"
        "responses:\n  '200':\n    description: ok\n"
    )


def test_references_that_cannot_be_followed_skip_only_their_operations(
    tmp_path: Path, capsys
) -> None:
    """A URL, a path out of the folder, a missing file, a pointer that is not there and two
    kinds of cycle: each operation that needs one is skipped with the reason; the good one
    imports with its schema."""
    (tmp_path / "secret.yml").write_text("type: object\n")
    root = tmp_path / "api"
    paths = {
        "/good": "ops/good.yml", "/remote": "ops/remote.yml", "/outside": "ops/outside.yml",
        "/missing": "ops/missing.yml", "/pointer": "ops/pointer.yml",
        "/alias": "ops/alias.yml", "/loop": "ops/loop_a.yml",
    }  # fmt: skip
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {p: {"post": {"$ref": ref}} for p, ref in paths.items()},
    }
    _write(root, {
        "openapi.yaml": yaml.safe_dump(doc),
        "ops/good.yml": _operation("good", "../models/thing.yml"),
        "ops/remote.yml": _operation("remote", "https://example.com/thing.yml"),
        "ops/outside.yml": _operation("outside", "../../secret.yml"),
        "ops/missing.yml": _operation("missing", "../models/nothing.yml"),
        "ops/pointer.yml": _operation("pointer", "../models/thing.yml#/nowhere"),
        "ops/alias.yml": _operation("alias", "../models/a.yml"),
        "ops/loop_a.yml": "$ref: 'loop_b.yml'\n",
        "ops/loop_b.yml": "$ref: 'loop_a.yml'\n",
        "models/thing.yml": "properties:\n  size: {type: integer}\nrequired: [size]\n",
        "models/a.yml": "$ref: 'b.yml'\n",
        "models/b.yml": "$ref: 'a.yml'\n",
    })  # fmt: skip
    manifest, err = _import(
        root / "openapi.yaml", tmp_path / "m" / "t.yaml", "http://x.test", capsys
    )
    assert [a["name"] for a in manifest["actions"]] == ["good"]
    assert manifest["actions"][0]["parameters"]["required"] == ["size"]
    assert "imported 1 of 7 operation(s), 6 skipped" in err
    warnings = {
        line.split()[2].rstrip(":"): line
        for line in err.splitlines()
        if line.startswith("warning:")
    }
    assert (
        "'https://example.com/thing.yml' is on the network, and chatops does not fetch"
        in (warnings["/remote"])
    )
    assert "$ref '../secret.yml' leaves the document's folder" in warnings["/outside"]
    assert "(models/nothing.yml) cannot be read" in warnings["/missing"]
    assert "(models/thing.yml#/nowhere) does not resolve" in warnings["/pointer"]
    assert "is a cycle of $refs (a -> b -> a)" in warnings["/alias"]
    loop = "is a cycle of $refs (ops/loop_a.yml -> ops/loop_b.yml -> ops/loop_a.yml)"
    assert loop in warnings["/loop"]
    assert "Traceback" not in err


def test_a_properties_map_in_another_file_is_copied_in(tmp_path: Path, capsys) -> None:
    """DigitalOcean's load balancers write `properties: {$ref: 'attributes.yml#/...'}` (the
    whole map of properties elsewhere): the four operations using it were skipped with
    "schema is not an object"; the map is copied in, and one that is not there is refused."""
    root = tmp_path / "api"
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/lbs": {"post": {"$ref": "ops/create.yml"}},
                  "/broken": {"post": {"$ref": "ops/broken.yml"}}},
    }  # fmt: skip
    _write(root, {
        "openapi.yaml": yaml.safe_dump(doc),
        "ops/create.yml": _operation("lbs_create", "../models/lb.yml"),
        "ops/broken.yml": _operation("broken", "../models/broken.yml"),
        "models/lb.yml": (
            "allOf:\n- type: object\n  properties:\n    $ref: 'attributes.yml#/droplet_ids'\n"
            "- type: object\n  properties:\n    region: {type: string}\n  required: [region]\n"
        ),
        "models/broken.yml": "type: object\nproperties:\n  $ref: 'attributes.yml#/nowhere'\n",
        "models/attributes.yml": (
            "droplet_ids:\n  droplet_ids:\n    type: array\n    items: {type: integer}\n"
        ),
    })  # fmt: skip
    manifest, err = _import(
        root / "openapi.yaml", tmp_path / "m" / "t.yaml", "http://x.test", capsys
    )
    actions = {a["name"]: a for a in manifest["actions"]}
    create = actions["lbs_create"]["parameters"]
    assert create["properties"]["droplet_ids"] == {"type": "array", "items": {"type": "integer"}}
    assert create["required"] == ["region"]
    assert "broken" not in actions
    assert "imported 1 of 2 operation(s), 1 skipped" in err
    assert "(models/attributes.yml#/nowhere) does not resolve" in err
    assert "Traceback" not in err
