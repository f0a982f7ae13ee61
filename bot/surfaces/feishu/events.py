"""Inbound glue for Feishu/Lark: SDK event objects -> `InboundMessage`, card clicks -> decisions.

The payload is verified by the time the parsers run (in webhook mode by `verify.py`, which hands
lark-oapi's `EventDispatcherHandler` the plaintext; in long-connection mode the connection itself
is authenticated). Everything here is pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from lark_oapi.api.im.v1 import P2ImMessageReceiveV1
from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTrigger

from bot.chat.decisions import CardClick
from bot.chat.threads import InboundMessage, ThreadRef
from bot.surfaces.feishu.render import DECISIONS, EDIT_CONTROLS, REASON_FIELD

PLATFORM = "feishu"
_PLACEHOLDER = re.compile(r"@_user_\d+")
_SPACES = re.compile(r"[ \t]+")


def message_text(message_type: str | None, content: str | None) -> str:
    """Plain text of a `text` or `post` (rich text) message; other types give ""."""
    if not isinstance(content, str):
        return ""
    try:
        body = json.loads(content or "{}")
    except (ValueError, RecursionError):
        return ""
    if not isinstance(body, dict):
        return ""
    if message_type == "text":
        return str(body.get("text", ""))
    if message_type == "post":
        # A post is {"title": ..., "content": [[{"tag": "text", "text": ...}, ...], ...]},
        # possibly wrapped in a locale key ({"zh_cn": {...}}).
        post = body if "content" in body else next(iter(body.values()), {})
        if not isinstance(post, dict):
            return ""
        lines = [str(post.get("title") or "")]
        for paragraph in post.get("content") or []:
            words = []
            for node in paragraph or []:
                if not isinstance(node, dict):
                    continue
                if node.get("tag") in ("text", "a", "code_block"):
                    words.append(str(node.get("text", "")))
                elif node.get("tag") == "at":
                    words.append(str(node.get("user_id", "")))
            lines.append("".join(words))
        return "\n".join(line for line in lines if line)
    return ""


def strip_mentions(text: str) -> str:
    """Remove `@_user_N` placeholders (Feishu's stand-ins for mentions) and tidy spaces."""
    cleaned = _PLACEHOLDER.sub("", text)
    return "\n".join(_SPACES.sub(" ", line).strip() for line in cleaned.splitlines()).strip()


@dataclass(frozen=True)
class ParsedMessage:
    """An inbound message and why it was kept (`reason` explains a drop in logs)."""

    message: InboundMessage | None
    reason: str = ""


def parse_message_event(data: P2ImMessageReceiveV1, bot_open_id: str | None) -> ParsedMessage:
    """Turn `im.message.receive_v1` into an `InboundMessage`, or say why it is ignored.

    Direct chats and group messages that mention the bot start or continue a conversation;
    a group reply in a thread (`root_id` set) without a mention is passed on with
    `mentions_bot=False`, and the run manager decides whether the bot is part of that thread.
    """
    header, event = data.header, data.event
    if header is None or event is None or event.message is None or event.sender is None:
        return ParsedMessage(None, "malformed event")
    sender, msg = event.sender, event.message
    if sender.sender_type != "user":
        return ParsedMessage(None, f"sender type {sender.sender_type!r}")
    user_id = sender.sender_id.open_id if sender.sender_id is not None else None
    ids = (user_id, msg.message_id, msg.chat_id, header.event_id)
    if not all(isinstance(i, str) and i for i in ids):
        return ParsedMessage(None, "missing ids")
    if not isinstance(msg.root_id or "", str) or not isinstance(header.tenant_key or "", str):
        return ParsedMessage(None, "malformed ids")
    mentions = msg.mentions or []
    if bot_open_id:
        mentions_bot = any(m.id is not None and m.id.open_id == bot_open_id for m in mentions)
    else:
        mentions_bot = any(m.mentioned_type == "bot" for m in mentions)
    direct = msg.chat_type == "p2p"
    if not direct and not mentions_bot and not msg.root_id:
        return ParsedMessage(None, "group message not addressed to the bot")
    text = strip_mentions(message_text(msg.message_type, msg.content))
    if not text:
        return ParsedMessage(None, f"no text in a {msg.message_type!r} message")
    tenant = header.tenant_key or sender.tenant_key or ""
    thread = ThreadRef(PLATFORM, tenant, msg.chat_id, msg.root_id or msg.message_id)
    inbound = InboundMessage(
        thread=thread,
        event_id=header.event_id,
        user_id=user_id,
        text=text,
        message_id=msg.message_id,
        mentions_bot=mentions_bot or direct,
        direct=direct,
    )
    return ParsedMessage(inbound)


@dataclass(frozen=True)
class CardDecision:
    """A click on an approval card: who (from the verified callback), what, and why."""

    approval_id: str
    decision: str
    operator_id: str
    reason: str
    message_id: str
    chat_id: str = ""
    tenant_key: str = ""  # the tenant the callback was delivered for (the card's)
    external: bool = False  # the operator belongs to another tenant
    form: dict[str, Any] = field(default_factory=dict)  # the form's values (an edit's fields)
    value: dict[str, Any] = field(default_factory=dict)  # what the button carried

    def card(self) -> CardClick:
        """Where the click was made, for the broker to compare with the approval's card."""
        return CardClick(platform=PLATFORM, workspace=self.tenant_key, channel=self.chat_id,
                         message_id=self.message_id, external=self.external)  # fmt: skip


def parse_card_action(data: P2CardActionTrigger) -> CardDecision | None:
    """Read the approval id and decision a button carries; the clicker comes from `operator`."""
    event = data.event
    if event is None or event.action is None or event.operator is None:
        return None
    value: Any = event.action.value or {}  # the SDK only admits a JSON object here
    approval_id, decision = value.get("approval_id"), value.get("decision")
    if approval_id is None and event.action.name:  # a form submit may carry only the name
        decision, _, approval_id = event.action.name.partition("__")
    operator = event.operator.open_id
    if not isinstance(approval_id, str) or decision not in (*DECISIONS, *EDIT_CONTROLS):
        return None
    if not operator:
        return None
    form = event.action.form_value or {}
    # a batch card has one comment field per call (and one for "all"): named after it
    reason = (
        form.get(REASON_FIELD) or form.get(f"{REASON_FIELD}__{approval_id}")
        if isinstance(form, dict)
        else None
    )
    context = event.context
    message_id = context.open_message_id if context is not None else None
    chat_id = context.open_chat_id if context is not None else None
    tenant = data.header.tenant_key if data.header is not None else None
    own_tenant = event.operator.tenant_key
    if not all(isinstance(v, str) and v for v in (message_id, chat_id, tenant, operator)):
        return None  # a click must say which card (message, chat) in which tenant, and by whom
    return CardDecision(
        approval_id=approval_id,
        decision=decision,
        operator_id=operator,
        reason=str(reason or "").strip(),
        message_id=str(message_id),
        chat_id=str(chat_id),
        tenant_key=str(tenant),
        external=bool(own_tenant) and own_tenant != tenant,
        form=dict(form) if isinstance(form, dict) else {},
        value=dict(value),
    )


# Where the SDK's event models expect an object (or a list of objects): a push whose decrypted
# JSON has something else there makes lark-oapi fail inside its own parsing, with a traceback.
_SHAPES: dict[str, dict[str, Any]] = {
    "im.message.receive_v1": {
        "event": {"sender": {"sender_id": {}}, "message": {"mentions": [{"id": {}}]}}
    },
    "card.action.trigger": {
        "event": {"operator": {}, "action": {"value": {}, "form_value": {}}, "context": {}}
    },
}


def event_shape_ok(event: Any) -> bool:
    """The push is an object, its `header` too, and the parts the SDK's model for its type
    reads are objects where objects belong (so the SDK can parse it without failing).

    lark-oapi would also try to decrypt an `encrypt` field inside the plaintext (which has none
    in a verified push)."""
    if not isinstance(event, dict) or "encrypt" in event:
        return False
    header = event.get("header")
    if header is not None and not isinstance(header, dict):
        return False
    kind = header.get("event_type") if isinstance(header, dict) else None
    return _fits(event, _SHAPES.get(kind, {})) if isinstance(kind, str) else True


def _fits(value: Any, shape: Any) -> bool:
    if value is None:
        return True
    if isinstance(shape, list):
        return isinstance(value, list) and all(_fits(item, shape[0]) for item in value)
    if not isinstance(value, dict):
        return False
    return all(_fits(value.get(key), sub) for key, sub in shape.items())
