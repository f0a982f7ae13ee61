"""Published OpenAPI documents (PagerDuty, OpenAI, Twilio, the OpenAPI Initiative's examples)
imported whole with `chatops manifests import-openapi`, loaded as connectors and called.

The documents are in `tests/data/` (compressed; sources and licences in its README).
"""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

import pytest
import yaml

from bot.approvals.schema import policy_of
from bot.cli import main
from connectors.connector_set import ConnectorSet
from connectors.loading import YAML_LOADER
from connectors.schema_fit import DEFAULT_MAX_CHARS, schema_chars
from tests.connectors.conftest import point_manifest_at
from tests.fakes.http_api import FakeHttpApi

DATA = Path(__file__).resolve().parents[1] / "data"


def unpack(name: str, directory: Path) -> Path:
    """A document from tests/data, decompressed into `directory`."""
    source = DATA / name
    opener = lzma.open if source.suffix == ".xz" else gzip.open
    target = directory / source.with_suffix("").name
    with opener(source, "rb") as packed:
        target.write_bytes(packed.read())
    return target


def import_spec(
    tmp_path: Path, name: str, connector: str, capsys, *extra: str
) -> tuple[dict, str, Path]:
    """Run the CLI import into tmp_path/manifests; the manifest, stderr and the file."""
    spec = unpack(name, tmp_path)
    out = tmp_path / "manifests" / f"{connector}.yaml"
    out.parent.mkdir(exist_ok=True)
    argv = ["manifests", "import-openapi", str(spec), "--name", connector, "--out", str(out)]
    assert main([*argv, "--use-spec-server", *extra]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return yaml.load(out.read_text(), Loader=YAML_LOADER), err, out


def validates(directory: Path, capsys) -> str:
    assert main(["manifests", "validate", str(directory)]) == 0
    return capsys.readouterr().out


async def test_pagerduty_imports_whole_and_its_tools_carry_their_bodies(
    tmp_path: Path, capsys, http, fake_api: FakeHttpApi
) -> None:
    manifest, err, path = import_spec(tmp_path, "pagerduty-rest-openapiv3.json.xz", "pd", capsys)
    # the first failure on main: `#/components/schemas/Tag/allOf/0` (a JSON Pointer index)
    assert "does not resolve" not in err
    assert "progress: reading pagerduty-rest-openapiv3.json (2.8 MB)" in err
    assert "imported 464 of 465 operation(s), 1 skipped" in err
    assert "uploadEnrichmentCsv): skipped at #/components/requestBodies/" in err
    assert "it needs a file upload (field 'file')" in err
    assert "required header parameter 'From' is not imported" in err
    assert "ok: " in validates(path.parent, capsys)
    assert manifest["auth"] == {"type": "header", "header": "Authorization",
                                "value_env": "PD_API_KEY", "prefix": "Token token="}  # fmt: skip
    assert manifest["headers"]["Accept"] == "application/vnd.pagerduty+json;version=2"
    actions = {a["name"]: a for a in manifest["actions"]}
    tag = actions["create_tags"]["parameters"]["properties"]["tag"]
    assert set(tag["properties"]) == {"type", "label"}  # allOf merged, readOnly fields left out
    incidents = actions["list_incidents"]
    assert incidents["wire_names"]["service_ids"] == "service_ids[]"
    deleted = actions["delete_event_enrichment_associations"]  # DELETE with a required body
    assert deleted["method"] == "DELETE" and deleted["body_arg"] == "body"
    assert max(schema_chars(a["parameters"]) for a in actions.values()) <= DEFAULT_MAX_CHARS

    point_manifest_at(path, fake_api.url)
    connectors = await ConnectorSet.load(path.parent, http=http, environ={"PD_API_KEY": "s3cret"})
    tools = connectors.tools
    assert len(tools) == 464
    create = tools.get("pd__create_tags")
    assert create is not None and policy_of(create).requires_approval
    result = await create.invoke({"tag": {"type": "tag", "label": "Batman"}})
    assert not result.is_error, result.content
    listed = await tools.get("pd__list_incidents").invoke(  # type: ignore[union-attr]
        {"service_ids": ["P1", "P2"], "limit": 5}
    )
    assert not listed.is_error, listed.content
    posted, got = fake_api.requests
    assert (posted.method, posted.path) == ("POST", "/tags")
    assert posted.body == {"tag": {"type": "tag", "label": "Batman"}}
    assert posted.headers["Authorization"] == "Token token=s3cret"
    assert posted.headers["Accept"] == "application/vnd.pagerduty+json;version=2"
    assert got.query == [("service_ids[]", "P1"), ("service_ids[]", "P2"), ("limit", "5")]


async def test_openai_imports_whole_with_composed_bodies_and_bounded_schemas(
    tmp_path: Path, capsys, http
) -> None:
    manifest, err, path = import_spec(tmp_path, "openai-openapi.yaml.xz", "openai", capsys)
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 9 and all("needs a file upload" in w for w in warnings)
    assert "imported 279 of 288 operation(s), 9 skipped" in err
    text = json.dumps(manifest)
    assert "$recursiveAnchor" not in text and "$recursiveRef" not in text
    for keyword in ('"xml"', '"externalDocs"', '"example"', '"discriminator"', '"readOnly"'):
        assert keyword not in text.replace('"properties"', "")  # never as a keyword
    actions = {a["name"]: a for a in manifest["actions"]}
    chat = actions["create_chat_completion"]["parameters"]
    assert {"messages", "model"} <= set(chat["properties"])  # allOf body merged, not dropped
    assert set(chat["required"]) >= {"messages", "model"}
    response = actions["create_response"]["parameters"]["properties"]
    assert {"input", "model", "tools"} <= set(response)
    search = actions["search_vector_store"]["parameters"]  # used $recursiveRef
    compound = search["$defs"]["CompoundFilter"]["properties"]["filters"]["items"]
    assert {"$ref": "#/$defs/CompoundFilter"} in compound["oneOf"]
    sizes = [schema_chars(a["parameters"]) for a in actions.values()]
    assert max(sizes) <= DEFAULT_MAX_CHARS  # main produced a 218 KB schema for one tool
    validates(path.parent, capsys)
    connectors = await ConnectorSet.load(path.parent, http=http, environ={"OPENAI_TOKEN": "k"})
    assert len(connectors.tools) == 279


async def test_twilio_form_bodies_and_odd_parameter_names_reach_the_wire(
    tmp_path: Path, capsys, http, fake_api: FakeHttpApi
) -> None:
    manifest, err, path = import_spec(tmp_path, "twilio_api_v2010.json.xz", "twilio", capsys)
    assert "imported 197 of 197 operation(s), 0 skipped" in err
    assert "request body" not in err  # main dropped every form body
    actions = {a["name"]: a for a in manifest["actions"]}
    send = actions["create_message"]
    assert send["body_encoding"] == "form"
    assert {"To", "From", "Body", "MediaUrl"} <= set(send["parameters"]["properties"])
    listing = actions["list_message"]["parameters"]["properties"]
    assert (
        "DateSent<" not in listing
        and "(sent as `DateSent<`)" in listing["DateSent_lt"]["description"]
    )
    validates(path.parent, capsys)
    point_manifest_at(path, fake_api.url)
    environ = {"TWILIO_USERNAME": "AC" + "a" * 32, "TWILIO_PASSWORD": "tw-s3cret"}
    connectors = await ConnectorSet.load(path.parent, http=http, environ=environ)
    sid = "AC" + "0" * 32
    sent = await connectors.tools.get("twilio__create_message").invoke(  # type: ignore[union-attr]
        {"AccountSid": sid, "To": "+15558675310", "Body": "Hello 👍",
         "MediaUrl": ["https://example.com/a.png", "https://example.com/b.png"]}
    )  # fmt: skip
    assert not sent.is_error, sent.content
    listed = await connectors.tools.get("twilio__list_message").invoke(  # type: ignore[union-attr]
        {"AccountSid": sid, "DateSent_lt": "2026-01-01T00:00:00Z"}
    )
    assert not listed.is_error, listed.content
    form, query = fake_api.requests
    assert form.path == f"/2010-04-01/Accounts/{sid}/Messages.json"
    assert form.content_type == "application/x-www-form-urlencoded"
    assert form.body == [("To", "+15558675310"), ("Body", "Hello 👍"),
                         ("MediaUrl", "https://example.com/a.png"),
                         ("MediaUrl", "https://example.com/b.png")]  # fmt: skip
    assert form.headers["Authorization"].startswith("Basic ")
    assert query.query == [("DateSent<", "2026-01-01T00:00:00Z")]


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in (DATA / "oai-examples").glob("*.gz") if "webhook" not in p.name),
)
def test_openapi_initiative_examples_import_and_validate(name: str, tmp_path: Path, capsys) -> None:
    manifest, err, path = import_spec(tmp_path, f"oai-examples/{name}", "example", capsys)
    assert "warning:" not in err
    assert manifest["actions"]
    validates(path.parent, capsys)


def test_a_webhooks_only_document_says_why_nothing_imports(tmp_path: Path, capsys) -> None:
    spec = unpack("oai-examples/examples_v3.1_webhook-example.yaml.gz", tmp_path)
    assert (
        main(["manifests", "import-openapi", str(spec), "--name", "hooks", "--use-spec-server"])
        == 2
    )
    err = capsys.readouterr().err
    assert "no operation to import" in err and "webhooks are requests the API sends" in err
    assert "Traceback" not in err
