"""The platform's side of Feishu events for tests: payloads built, encrypted and signed as
Feishu does (`im.message.receive_v1`, `card.action.trigger`, url_verification), and pushed to the
bot. `FakeFeishu` (feishu_api.py) mixes this in, so its messages are the ones events refer to.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from Crypto.Cipher import AES


@dataclass
class FakeMessage:
    """A message as the fake platform stores it; `contents` holds every version, newest last."""

    message_id: str
    chat_id: str
    msg_type: str
    root_id: str = ""
    parent_id: str = ""
    receive_id: str = ""
    contents: list[str] = field(default_factory=list)

    @property
    def content(self) -> dict[str, Any]:
        return json.loads(self.contents[-1])


def encrypt(encrypt_key: str, plaintext: str) -> str:
    """Feishu's event encryption: AES-256-CBC, key sha256(encrypt_key), random IV first."""
    key = hashlib.sha256(encrypt_key.encode()).digest()
    iv = os.urandom(16)
    data = plaintext.encode()
    pad = 16 - len(data) % 16
    data += bytes([pad]) * pad
    return base64.b64encode(iv + AES.new(key, AES.MODE_CBC, iv).encrypt(data)).decode()


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """`X-Lark-Signature`: sha256 hex of timestamp + nonce + encrypt_key + raw body."""
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


class FeishuEventSource:
    """Builds and sends events for one app; needs the attributes FakeFeishu sets."""

    app_id: str
    verification_token: str
    encrypt_key: str
    tenant_key: str
    bot_open_id: str
    messages: dict[str, FakeMessage]
    chat_types: dict[str, str]  # chat_id -> p2p or group, as the chats' events said
    members: dict[str, set[str]]  # chat_id -> open_ids seen writing in it (or `join`ed)

    def _header(self, event_type: str, event_id: str | None) -> dict[str, Any]:
        return {
            "event_id": event_id or secrets.token_hex(16),
            "token": self.verification_token,
            "create_time": str(int(time.time() * 1000)),
            "event_type": event_type,
            "tenant_key": self.tenant_key,
            "app_id": self.app_id,
        }

    def message_event(
        self,
        text: str,
        *,
        user: str = "ou_user",
        chat_id: str = "oc_group",
        chat_type: str = "group",
        mention_bot: bool = True,
        root_id: str = "",
        message_id: str | None = None,
        event_id: str | None = None,
        sender_type: str = "user",
    ) -> dict[str, Any]:
        """An `im.message.receive_v1` event (schema 2.0) as Feishu sends it."""
        mentions = []
        if mention_bot:
            text = f"@_user_1 {text}"
            mentions.append(
                {
                    "key": "@_user_1",
                    "name": "chatops",
                    "tenant_key": self.tenant_key,
                    "id": {"open_id": self.bot_open_id, "union_id": "on_bot", "user_id": ""},
                }
            )
        message = {
            "message_id": message_id or f"om_in_{secrets.token_hex(6)}",
            "root_id": root_id,
            "parent_id": root_id,
            "create_time": str(int(time.time() * 1000)),
            "update_time": "",
            "chat_id": chat_id,
            "chat_type": chat_type,
            "message_type": "text",
            "content": json.dumps({"text": text}),
            "mentions": mentions,
        }
        # the sender is in the chat (what Feishu's ephemeral cards require)
        self.chat_types.setdefault(chat_id, chat_type)
        self.members.setdefault(chat_id, set()).add(user)
        # the user's message exists on the platform, so the bot can reply to it
        self.messages.setdefault(
            message["message_id"],
            FakeMessage(
                message["message_id"],
                chat_id,
                "text",
                root_id,
                root_id,
                receive_id=user,
                contents=[message["content"]],
            ),
        )
        sender = {
            "sender_id": {"open_id": user, "union_id": f"on_{user}", "user_id": ""},
            "sender_type": sender_type,
            "tenant_key": self.tenant_key,
        }
        return {
            "schema": "2.0",
            "header": self._header("im.message.receive_v1", event_id),
            "event": {"sender": sender, "message": message},
        }

    def card_action(
        self,
        card_message_id: str,
        decision: str,
        *,
        user: str,
        reason: str = "",
        chat_id: str = "oc_group",
        approval_id: str | None = None,
        operator_tenant: str | None = None,
        tenant: str | None = None,
        button_of: str | None = None,
    ) -> dict[str, Any]:
        """A `card.action.trigger` callback for a click on one button of an approval card.

        `operator_tenant`: the clicker's own tenant (another one for an external user in an
        external group); `tenant`: the tenant the callback is delivered for (default this
        app's); `approval_id`: a forged id in place of the button's; `button_of`: the button
        of that approval (a batch card's calls each have theirs), `reason` typed in its form's
        own comment field."""
        # the newest version that still shows the button (a slow client may show an old one)
        versions = [json.loads(c) for c in reversed(self.messages[card_message_id].contents)]
        button = next(
            (b for b in (_find_button(v, decision, button_of) for v in versions) if b is not None),
            None,
        )
        assert button is not None, f"no {decision!r} button on the card"
        value = dict(button["behaviors"][0]["value"])
        if approval_id is not None:
            value["approval_id"] = approval_id
        action = {
            "tag": "button",
            "name": button["name"],
            "value": value,
            "form_value": {f"reject_reason__{button_of}" if button_of else "reject_reason": reason},
        }
        event = {
            "operator": {
                "tenant_key": operator_tenant or self.tenant_key,
                "open_id": user,
                "union_id": f"on_{user}",
            },  # fmt: skip
            "token": f"c-{secrets.token_hex(8)}",
            "action": action,
            "host": "im_message",
            "context": {"open_message_id": card_message_id, "open_chat_id": chat_id},
        }
        header = self._header("card.action.trigger", None)
        header["tenant_key"] = tenant or self.tenant_key
        return {"schema": "2.0", "header": header, "event": event}

    def form_action(
        self,
        card_message_id: str,
        card: dict[str, Any],
        decision: str,
        *,
        user: str,
        form_value: dict[str, Any],
        chat_id: str = "oc_group",
    ) -> dict[str, Any]:
        """A `card.action.trigger` callback for a submit button of `card` (a card the bot
        answered a callback with, shown in place of the message's): its value and name, and
        the form's values as the client sends them."""
        button = _find_button(card, decision)
        assert button is not None, f"no {decision!r} button on the card"
        action = {
            "tag": "button",
            "name": button["name"],
            "value": dict(button["behaviors"][0]["value"]),
            "form_value": form_value,
        }
        event = {
            "operator": {"tenant_key": self.tenant_key, "open_id": user, "union_id": f"on_{user}"},
            "token": f"c-{secrets.token_hex(8)}",
            "action": action,
            "host": "im_message",
            "context": {"open_message_id": card_message_id, "open_chat_id": chat_id},
        }
        header = self._header("card.action.trigger", None)
        header["tenant_key"] = self.tenant_key
        return {"schema": "2.0", "header": header, "event": event}

    def question_action(
        self,
        card_message_id: str,
        action: str,
        *,
        user: str,
        form_value: dict[str, Any] | None = None,
        card: dict[str, Any] | None = None,
        value: dict[str, Any] | None = None,
        chat_id: str = "oc_group",
    ) -> dict[str, Any]:
        """A `card.action.trigger` callback for a question card's Send ("accept", with the
        form's values) or Decline ("decline") button, on `card` (default: the message's newest
        version); `value` forges what the button carried."""
        shown = card or json.loads(self.messages[card_message_id].contents[-1])  # type: ignore[attr-defined]
        button = _find_question_button(shown, action)
        assert button is not None, f"no {action!r} button on the question card"
        sent = {
            "tag": "button",
            "name": button["name"],
            "value": value if value is not None else dict(button["behaviors"][0]["value"]),
        }
        if button.get("form_action_type") == "submit":
            sent["form_value"] = form_value or {}
        event = {
            "operator": {"tenant_key": self.tenant_key, "open_id": user, "union_id": f"on_{user}"},
            "token": f"c-{secrets.token_hex(8)}",
            "action": sent,
            "host": "im_message",
            "context": {"open_message_id": card_message_id, "open_chat_id": chat_id},
        }
        header = self._header("card.action.trigger", None)
        header["tenant_key"] = self.tenant_key
        return {"schema": "2.0", "header": header, "event": event}

    def control_action(
        self,
        card_message_id: str,
        control: str,
        *,
        user: str,
        rating: str = "",
        chat_id: str = "oc_group",
        value: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A `card.action.trigger` callback for the Stop button ("stop") of a status card or a
        feedback button ("feedback", `rating` up or down) of an answer card; `value` forges
        what the button carried."""
        card = json.loads(self.messages[card_message_id].contents[-1])  # type: ignore[attr-defined]
        button = _find_control(card, control, rating)
        assert button is not None, f"no {control!r} button on the card"
        event = {
            "operator": {"tenant_key": self.tenant_key, "open_id": user, "union_id": f"on_{user}"},
            "token": f"c-{secrets.token_hex(8)}",
            "action": {"tag": "button", "value": value or button["behaviors"][0]["value"]},
            "host": "im_message",
            "context": {"open_message_id": card_message_id, "open_chat_id": chat_id},
        }
        header = self._header("card.action.trigger", None)
        header["tenant_key"] = self.tenant_key
        return {"schema": "2.0", "header": header, "event": event}

    def url_verification(self) -> dict[str, Any]:
        return {
            "challenge": secrets.token_hex(8),
            "token": self.verification_token,
            "type": "url_verification",
        }

    def signed(
        self,
        payload: dict[str, Any],
        *,
        encrypted: bool = True,
        key: str | None = None,
        sent_at: float | None = None,
    ) -> tuple[bytes, dict[str, str]]:
        """Body and headers of a push: encrypted with the app's key and signed with it, at
        `sent_at` (default now; an older time makes a replay of a captured request).

        A url_verification challenge is encrypted but, as Feishu sends it, not signed: it
        carries no `X-Lark-*` headers even when an encrypt key is set.
        """
        key = self.encrypt_key if key is None else key
        plain = json.dumps(payload)
        body = json.dumps({"encrypt": encrypt(key, plain)} if encrypted else payload).encode()
        if payload.get("type") == "url_verification":
            return body, {"Content-Type": "application/json"}
        ts, nonce = str(int(time.time() if sent_at is None else sent_at)), secrets.token_hex(8)
        headers = {
            "Content-Type": "application/json",
            "X-Lark-Request-Timestamp": ts,
            "X-Lark-Request-Nonce": nonce,
            "X-Lark-Signature": signature(ts, nonce, key, body),
        }
        return body, headers

    async def push(
        self,
        url: str,
        payload: dict[str, Any],
        *,
        encrypted: bool = True,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        sent_at: float | None = None,
    ) -> tuple[int, Any]:
        """POST an event or callback to the bot as Feishu does; returns (status, JSON body)."""
        body, sent = self.signed(payload, encrypted=encrypted, key=key, sent_at=sent_at)
        sent.update(headers or {})
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=body, headers=sent) as resp,
        ):
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text


def _find_button(
    card: dict[str, Any], decision: str, of: str | None = None
) -> dict[str, Any] | None:
    """The button of an approval card whose callback value carries `decision` (and, with
    `of`, names that approval: a batch card has one such button per call)."""
    stack: list[Any] = [card]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("tag") == "button":
                for behavior in node.get("behaviors", []):
                    value = behavior.get("value", {})
                    if value.get("decision") == decision and of in (None, value.get("approval_id")):
                        return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _find_question_button(card: dict[str, Any], action: str) -> dict[str, Any] | None:
    """The Send or Decline button of a question card (by its callback value)."""
    stack: list[Any] = [card]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("tag") == "button":
                for behavior in node.get("behaviors", []):
                    if behavior.get("value", {}).get("question") == action:
                        return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _find_control(card: dict[str, Any], control: str, rating: str) -> dict[str, Any] | None:
    """The Stop or feedback button of a card (by its callback value)."""
    stack: list[Any] = [card]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("tag") == "button":
                for behavior in node.get("behaviors", []):
                    value = behavior.get("value", {})
                    if value.get("chatops") == control and value.get("rating", "") == rating:
                        return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None
