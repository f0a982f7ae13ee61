"""Thousands of imported tools through `chatops chat` (issue 32 item 3): the real CLI loads 6,032
actions imported from PagerDuty's published OpenAPI document (13 copies under other names),
selects among them, calls the one it needs on the fake HTTP API and answers; FakeOpenAI, which
refuses what the real API refuses, shows every model request within the limits."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from bot.engine.agent_limits import EngineLimits
from connectors.loading import YAML_DUMPER, YAML_LOADER
from tests.connectors.test_openapi_real import unpack
from tests.fakes.http_api import FakeHttpApi
from tests.fakes.openai_server import MAX_TOOLS, FakeOpenAI, Turn, answer, tool_call
from tests.terminal.test_chat_cli import run_cli

COPIES = 13  # x 464 imported operations = 6,032 tools
SECRET = "pd-t0ken-n3ver-shown"
WANTED = "pd7__list_incidents"
LIMITS = EngineLimits()


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> str:
    """PagerDuty's document imported once for the module by the real `chatops manifests
    import-openapi`: the manifest's YAML, its base URL read from PD_URL."""
    work = tmp_path_factory.mktemp("many")
    spec = unpack("pagerduty-rest-openapiv3.json.xz", work)
    out = work / "pd.yaml"
    argv = ["manifests", "import-openapi", str(spec), "--name", "pd", "--out", str(out)]
    assert main([*argv, "--base-url", "http://127.0.0.1:9"]) == 0
    manifest = yaml.load(out.read_text(), Loader=YAML_LOADER)
    return yaml.dump({**manifest, "base_url_env": "PD_URL"}, Dumper=YAML_DUMPER, sort_keys=False)


def copies(imported: str, directory: Path, count: int) -> Path:
    """`count` copies of the import as connectors `pd0`, `pd1`, ... (464 tools each)."""
    directory.mkdir()
    for copy in range(count):
        text = re.sub(r"^name: pd$", f"name: pd{copy}", imported, count=1, flags=re.M)
        (directory / f"pd{copy}.yaml").write_text(text)
    return directory


@pytest.fixture
def many_env(
    imported: str, tmp_path: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, monkeypatch
) -> Path:
    """13 copies (6,032 tools); the LLM and PD_URL pointing at the fakes."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    monkeypatch.setenv("CHATOPS_MODEL", "fake-model")
    monkeypatch.setenv("PD_API_KEY", SECRET)
    monkeypatch.setenv("PD_URL", fake_api.url)
    fake_api.route("GET", "/incidents", json_body={"incidents": [{"id": "P1X", "status":
                                                                  "triggered"}]})  # fmt: skip
    return copies(imported, tmp_path / "manifests", COPIES)


@pytest.fixture
def some_env(many_env: Path, imported: str, tmp_path: Path) -> Path:
    """The same with 8 copies (3,712 tools): enough to need browsing, quicker to load."""
    return copies(imported, tmp_path / "some", 8)


def forced(body: dict[str, Any]) -> str:
    """The function a selection request forces ('' for the loop's own requests)."""
    choice = body.get("tool_choice")
    return choice["function"]["name"] if isinstance(choice, dict) else ""


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def assert_within_limits(fake: FakeOpenAI) -> None:
    """No request refused; each with at most 128 tools, and each selection request within its
    token budget (its prompt) and about as many bytes (JSON escaping and the schema around)."""
    assert fake.refused == []
    for body, size in zip(fake.requests, fake.request_bytes, strict=True):
        assert len(body.get("tools") or []) <= MAX_TOOLS
        assert size < 1024 * 1024
        if forced(body).startswith("select_"):
            assert len(body["messages"][0]["content"]) <= LIMITS.tool_catalogue_max_tokens * 4
            assert size <= LIMITS.tool_catalogue_max_tokens * 4 * 1.1 + 1000


def model(body: dict[str, Any]) -> Turn:
    """A model that browses to pd7's incidents, picks `list_incidents`, calls it, answers."""
    prompt = body["messages"][0]["content"]
    if forced(body) == "select_tool_groups":
        assert "There are 6032 tools, too many to list" in prompt
        assert "- pd7/Incidents (29 tools): list_incidents" in prompt
        return tool_call("select_tool_groups", {"groups": ["pd7/Incidents"]})
    if forced(body) == "select_tools":
        assert f"## pd7/Incidents\n- {WANTED}: List incidents" in prompt
        return tool_call("select_tools", {"tools": [WANTED]})
    if body.get("stream"):
        return answer("P1X is the one triggered incident.")
    if not tool_results(body):
        return tool_call(WANTED, {"limit": 5})
    return answer("P1X is triggered.")


async def test_chat_over_six_thousand_imported_tools_selects_calls_and_answers(
    many_env: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, capsys
) -> None:
    fake_openai.respond_with(model)
    code = await run_cli("chat", "--manifests", str(many_env), "--approve", "none",
                         "which pd7 incidents are triggered?")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "P1X is the one triggered incident.\n"
    assert "Traceback" not in err and SECRET not in out + err
    assert ", ... and 6012 more (6032 tools)\n" in err  # the start-up line is not 200 KB
    assert_within_limits(fake_openai)
    kinds = [forced(body) or ("stream" if body.get("stream") else "loop")
             for body in fake_openai.requests]  # fmt: skip
    assert kinds == ["select_tool_groups", "select_tools", "loop", "loop", "stream"]
    loop = fake_openai.requests[2]
    assert [t["function"]["name"] for t in loop["tools"]] == [WANTED, "request_tools"]
    assert len(fake_api.calls("/incidents", "GET")) == 1, err
    (call,) = fake_api.calls("/incidents", "GET")
    assert call.headers["Authorization"] == f"Token token={SECRET}"
    assert ("limit", "5") in call.query


async def test_chat_recovers_from_a_wrong_pick_with_request_tools(
    some_env: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, capsys
) -> None:
    """Selection picks pd7's users; the model asks for an incidents tool and calls it."""

    def wrong_pick(body: dict[str, Any]) -> Turn:
        if forced(body) == "select_tool_groups":
            return tool_call("select_tool_groups", {"groups": ["pd7/Users"]})
        if forced(body) == "select_tools":
            return tool_call("select_tools", {"tools": ["pd7__list_users"]})
        if body.get("stream"):
            return answer("P1X is triggered.")
        results = tool_results(body)
        if not results:
            return tool_call("request_tools", {"query": "list pd7 incidents"}, id="ask")
        if len(results) == 1:
            assert f"- {WANTED}: List incidents" in results[0], results[0]
            assert WANTED in [t["function"]["name"] for t in body["tools"]]
            return tool_call(WANTED, {}, id="list")
        return answer("done")

    fake_openai.respond_with(wrong_pick)
    code = await run_cli("chat", "--manifests", str(some_env), "--approve", "none",
                         "what incidents does pd7 have?")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "P1X is triggered.\n"
    assert_within_limits(fake_openai)
    assert len(fake_api.calls("/incidents", "GET")) == 1
    assert "<- pd7__list_incidents (ok)" in err


async def test_chat_whose_selection_fails_sends_what_fits_and_still_answers(
    some_env: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, capsys
) -> None:
    """A model that never answers a selection properly: no request has every tool (that was
    an HTTP 413 and a traceback); the loop gets the best-ranked that fit, and request_tools."""

    def unhelpful(body: dict[str, Any]) -> Turn:
        if forced(body).startswith("select_") or "Reply with only one JSON" in json.dumps(body):
            return answer("I would rather not choose.")
        if body.get("stream"):
            return answer("I could not find it.")
        return answer("nothing")

    fake_openai.respond_with(unhelpful)
    code = await run_cli("chat", "--manifests", str(some_env), "--approve", "none",
                         "list the incidents of pd7")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "I could not find it.\n" and "Traceback" not in err
    assert_within_limits(fake_openai)
    loop = [body for body in fake_openai.requests if "tools" in body and not forced(body)]
    names = [t["function"]["name"] for t in loop[0]["tools"]]
    assert 0 < len(names) <= MAX_TOOLS and names[-1] == "request_tools"
    schemas = sum(len(json.dumps(t, separators=(",", ":"))) for t in loop[0]["tools"])
    assert schemas <= LIMITS.tool_schemas_max_chars + 1000
    assert WANTED in names  # ranked first among those that fit by the request's words
