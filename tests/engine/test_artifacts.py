"""Artifacts in the engine: a document result is kept out of the model's context (its name and
a short summary instead), kept whole for the answer, and survives a checkpoint."""

from __future__ import annotations

import json
from typing import Any

from bot.engine.agent import ReActAgent
from bot.engine.state import RunState
from bot.engine.tools import ToolResult
from connectors.manifest import manifest_json_schema
from tests.engine.helpers import echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call

DEEP = "the deep detail only the document holds"
DOC = "# Weekly report\n\n" + "All services were healthy this week. " * 20 + f"\n\n{DEEP}\n"


def _doc_tool(result: ToolResult):
    async def reply(args: dict[str, Any]) -> ToolResult:
        return result

    return echo_tool("ops__report", reply=reply)


async def test_a_document_result_reaches_the_answer_not_the_model(
    fake_openai: FakeOpenAI,
) -> None:
    checkpoints: list[dict[str, Any]] = []

    async def keep(state: dict[str, Any]) -> None:
        checkpoints.append(state)

    doc = ToolResult(DOC, content_type="text/markdown; charset=utf-8")
    fake_openai.script(tool_call("ops__report", {}), tool_call("ops__report", {}), answer("ok"),
                       answer("The report is attached."))  # fmt: skip
    agent = ReActAgent(make_llm(fake_openai), registry(_doc_tool(doc)), completion_check=False)
    result = await agent.run("weekly report", on_checkpoint=keep)
    assert [a.name for a in result.artifacts] == ["ops__report.md", "ops__report-2.md"]
    assert result.artifacts[0].content == DOC and result.artifacts[0].content_type == (
        "text/markdown"
    )
    observation = fake_openai.requests[1]["messages"][-1]["content"]
    assert observation.startswith("[Artifact generated: ops__report.md]")
    assert 'Title: "Weekly report"' in observation and "attached to the answer" in observation
    await agent.synthesize(result)
    assert DEEP not in json.dumps(fake_openai.requests)  # neither the loop nor the synthesis
    restored = RunState.from_dict(checkpoints[-1])
    assert restored.artifacts == result.artifacts


async def test_errors_and_plain_text_are_not_artifacts(fake_openai: FakeOpenAI) -> None:
    failing = ToolResult("<html>502 Bad Gateway</html>", is_error=True, content_type="text/html")
    fake_openai.script(tool_call("ops__report", {}), answer("failed"))
    agent = ReActAgent(make_llm(fake_openai), registry(_doc_tool(failing)))
    result = await agent.run("q")
    assert result.artifacts == []
    assert "502 Bad Gateway" in fake_openai.requests[1]["messages"][-1]["content"]


async def test_a_tool_may_declare_its_result_a_document(fake_openai: FakeOpenAI) -> None:
    html = "<!doctype html><html><body><h1>Hi</h1></body></html>"
    flagged = ToolResult(html, artifact=True, filename="../../etc/passwd page.HTML")
    fake_openai.script(tool_call("ops__report", {}), answer("ok"))
    result = await ReActAgent(make_llm(fake_openai), registry(_doc_tool(flagged))).run("q")
    [artifact] = result.artifacts
    assert (artifact.name, artifact.content_type) == ("passwd-page.html", "text/html")


def test_the_manifest_schema_documents_result_artifact() -> None:
    schema = json.dumps(manifest_json_schema())
    assert '"artifact"' in schema and "kept out of the model's context" in schema
