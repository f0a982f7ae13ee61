"""docs/feishu.md's permission table matches the Open API calls the Feishu surface makes.

The calls are read from the code (`<client>.<service>.v<N>.<resource>.<method>(...)` and raw
`BaseRequest` URIs), each mapped to the scopes Feishu accepts for it (open.feishu.cn, each
method's "权限要求": any one of them is enough). A call whose scopes the page does not ask for
fails a real install; a scope no call needs asks the tenant admin for too much.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.python_source import parse_file

ROOT = Path(__file__).resolve().parents[2]
FEISHU_CODE = ROOT / "bot" / "surfaces" / "feishu"

# any one scope of each set lets the app call the method
CALL_SCOPES: dict[str, set[str]] = {
    "im.v1.message.create": {"im:message", "im:message:send_as_bot"},
    "im.v1.message.reply": {"im:message", "im:message:send_as_bot"},
    "im.v1.message.patch": {"im:message", "im:message:send_as_bot", "im:message:update"},
    "im.v1.file.create": {"im:resource", "im:resource:upload"},
    "cardkit.v1.card.create": {"cardkit:card:write"},
    "cardkit.v1.card.update": {"cardkit:card:write"},
    "cardkit.v1.card_element.content": {"cardkit:card:write"},
    "/open-apis/bot/v3/info": set(),  # the bot's own open_id: no scope
    # a card only one person sees in a group chat (private notes, connect links)
    "/open-apis/ephemeral/v1/send": {"im:message", "im:message:send_as_bot"},
}
# im.message.receive_v1 (the one event the surface registers): what it delivers by scope
EVENT_SCOPES = {
    "im:message.group_at_msg:readonly",  # group messages that mention the bot
    "im:message.p2p_msg:readonly",  # direct messages
    "im:message.group_msg",  # thread replies without a mention (optional)
}


def feishu_calls() -> set[str]:
    calls: set[str] = set()
    for path in FEISHU_CODE.glob("*.py"):
        tree = parse_file(path)
        for node in ast.walk(tree):  # called, or handed to the retrying caller
            if isinstance(node, ast.Attribute):
                chain = ast.unparse(node)
                found = re.search(r"\.((?:im|cardkit|contact|drive)\.v\d+\.\w+\.\w+)$", chain)
                if found:
                    calls.add(found.group(1))
            if (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "uri" and node.args
                and isinstance(node.args[0], ast.Constant)
            ):  # fmt: skip
                calls.add(str(node.args[0].value))
    return calls


def documented_scopes() -> set[str]:
    """The scopes in the first column of docs/feishu.md's permission table."""
    text = (ROOT / "docs" / "feishu.md").read_text()
    return set(re.findall(r"^\s*\| `([a-z][\w.:]+)`", text, flags=re.MULTILINE))


def test_the_docs_ask_for_exactly_the_scopes_the_code_needs() -> None:
    calls = feishu_calls()
    assert {"im.v1.message.create", "im.v1.file.create"} <= calls  # the scan works
    unknown = calls - CALL_SCOPES.keys()
    assert not unknown, f"write the scopes of {sorted(unknown)} into CALL_SCOPES"
    documented = documented_scopes()
    for call in sorted(calls):
        needs = CALL_SCOPES[call]
        assert not needs or needs & documented, f"{call} needs one of {sorted(needs)}"
    used = EVENT_SCOPES.union(*(CALL_SCOPES[c] for c in calls))
    assert documented <= used, f"asked for but never needed: {sorted(documented - used)}"
    assert EVENT_SCOPES - {"im:message.group_msg"} <= documented


def test_the_surface_registers_only_the_event_the_scopes_cover() -> None:
    source = (FEISHU_CODE / "surface.py").read_text()
    registered = set(re.findall(r"\.register_(p2_\w+)\(", source))
    assert registered == {"p2_im_message_receive_v1", "p2_card_action_trigger"}
