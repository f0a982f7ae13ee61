"""Images a tool returns: a model with the `vision` ability reads them as image parts (native
and JSON mode), counted as images, not as base64 text, by the context guard and compaction."""

from __future__ import annotations

from typing import Any

from bot.engine import prompts
from bot.engine.agent import ReActAgent
from bot.engine.compaction import _line
from bot.engine.context import IMAGE_TOKENS, estimate_message
from bot.engine.tools import ToolImage, ToolResult
from tests.engine.helpers import echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, json_action_call, json_final

DATA = "iVBORw0KGgo" * 1000  # 11,000 characters of "base64"
IMAGE = ToolImage("image/png", DATA)


async def chart(args: dict[str, Any]) -> ToolResult:
    return ToolResult("CPU chart\n[image 1 (image/png, 8 KB)]", images=(IMAGE,))


async def test_json_mode_shows_the_image_after_the_observation(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(json_action_call("ops__chart", {}), json_final("it is flat"))
    llm = make_llm(fake_openai, abilities={"json_mode": True, "vision": True})
    result = await ReActAgent(llm, registry(echo_tool("ops__chart", reply=chart))).run("cpu?")
    assert result.answer == "it is flat"
    observation, images = fake_openai.requests[1]["messages"][-2:]
    assert observation["content"] == "Observation: CPU chart\n[image 1 (image/png, 8 KB)]"
    assert images == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Image 1 returned by ops__chart:"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{DATA}"}},
        ],
    }


def test_an_image_part_counts_as_an_image_and_reads_as_one() -> None:
    message = prompts.tool_images([("ops__chart", (IMAGE, IMAGE))])
    text_only = prompts.user("Image 1 returned by ops__chart:\nImage 2 returned by ops__chart:")
    assert estimate_message(message) < estimate_message(text_only) + 2 * IMAGE_TOKENS + 5
    assert estimate_message(message) >= 2 * IMAGE_TOKENS
    line = _line(message)
    assert DATA[:20] not in line and line.count("[image]") == 2
