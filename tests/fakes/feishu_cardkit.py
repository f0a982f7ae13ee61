"""FakeFeishu's CardKit (`/open-apis/cardkit/v1/...`): card entities, the streamed text of their
elements, whole-card updates and settings, and sending an entity by its card_id.

Mixed into `FakeFeishu` (tests/fakes/feishu_api.py). Validated as the documentation states:
card JSON 2.0 only, never `update_multi: false`, at most 30 KB; an entity is sent once; every
operation on one card carries a `sequence` higher than the last; element text is streamed only
while `streaming_mode` is on. The error codes for a sequence that does not rise (300317) and a
card no longer streaming (300309) are this fake's; 99992402 is Feishu's field validation error.
`turn_off_cardkit()` answers every CardKit call as an app without the `cardkit:card:write`
scope does (code 99991672).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

CARD_LIMIT = 30 * 1024
INVALID = 99992402  # Feishu: field validation failed
MISSING_SCOPE = 99991672  # Feishu: the app lacks a scope this API needs
SEQUENCE_NOT_RISING = 300317  # this fake's code
NOT_STREAMING = 300309  # this fake's code


@dataclass
class CardEntity:
    card_id: str
    card: dict[str, Any]
    sequence: int = 0
    message_id: str | None = None  # the message it was sent as (once)
    versions: list[dict[str, Any]] = field(default_factory=list)  # every state, newest last
    streamed: list[str] = field(default_factory=list)  # each content update's text

    def element(self, element_id: str) -> dict[str, Any] | None:
        stack: list[Any] = [self.card.get("body", {})]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if node.get("element_id") == element_id:
                    return node
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return None


def card_problem(data: Any) -> str | None:
    """Why Feishu would refuse this card JSON for an entity (None: it would not)."""
    if not isinstance(data, str) or len(data.encode()) > CARD_LIMIT:
        return "card data missing or over 30 KB"
    try:
        card = json.loads(data)
    except ValueError:
        return "card data is not JSON"
    if not isinstance(card, dict) or card.get("schema") != "2.0":
        return "only card JSON 2.0 makes an entity"
    if (card.get("config") or {}).get("update_multi") is False:
        return "an entity cannot be an exclusive card (update_multi false)"
    if not isinstance((card.get("body") or {}).get("elements"), list):
        return "the card has no body elements"
    return None


class CardKitMethods:
    """The CardKit routes of FakeFeishu (state lives on the FakeFeishu instance)."""

    messages: dict[str, Any]

    def _cardkit_routes(self, router: web.UrlDispatcher) -> None:
        self.cards: dict[str, CardEntity] = {}
        self.cardkit_off = False
        base = "/open-apis/cardkit/v1/cards"
        router.add_post(base, self._card_create)
        router.add_put(base + "/{card_id}", self._card_update)
        router.add_patch(base + "/{card_id}/settings", self._card_settings)
        router.add_put(base + "/{card_id}/elements/{element_id}/content", self._card_content)

    def turn_off_cardkit(self) -> None:
        """Every CardKit call fails like an app without `cardkit:card:write`."""
        self.cardkit_off = True

    def card_of(self, message_id: str) -> CardEntity | None:
        return next((c for c in self.cards.values() if c.message_id == message_id), None)

    # --- helpers --------------------------------------------------------------------------

    async def _cardkit_call(self, request: web.Request, op: str) -> tuple[Any, web.Response | None]:
        call, fault = await self._record(request, op)  # type: ignore[attr-defined]
        if fault is None and self.cardkit_off:
            call.code = MISSING_SCOPE
            msg = "Access denied. One of the following scopes is required: [cardkit:card:write]."
            fault = web.json_response({"code": MISSING_SCOPE, "msg": msg, "data": {}}, status=400)
        return call, fault

    def _error(self, code: int, msg: str) -> web.Response:
        return self._envelope({}, code=code, msg=msg)  # type: ignore[attr-defined]

    def _sequenced(self, card_id: str, body: Any) -> tuple[CardEntity | None, web.Response | None]:
        card = self.cards.get(card_id)
        if card is None:
            return None, self._error(INVALID, "card not found")
        sequence = body.get("sequence") if isinstance(body, dict) else None
        if not isinstance(sequence, int) or isinstance(sequence, bool):
            return None, self._error(INVALID, "sequence is required")
        if sequence <= card.sequence:
            return None, self._error(SEQUENCE_NOT_RISING, "sequence must be greater than the last")
        return card, None

    def _card_changed(self, card: CardEntity) -> None:
        card.versions.append(json.loads(json.dumps(card.card)))
        if card.message_id is not None and card.message_id in self.messages:
            self.messages[card.message_id].contents.append(json.dumps(card.card))

    def sent_entity(self, content: str) -> tuple[str | None, str | None]:
        """For a message sent with `{"type": "card", "data": {"card_id": ...}}`: (the card's
        JSON, None) or (None, why not); (None, None) for any other content."""
        try:
            body = json.loads(content)
        except ValueError:
            return None, None
        if not isinstance(body, dict) or body.get("type") != "card":
            return None, None
        card = self.cards.get(str((body.get("data") or {}).get("card_id")))
        if card is None:
            return None, "card entity not found"
        if card.message_id is not None:
            return None, "a card entity is sent only once"
        return json.dumps(card.card), None

    # --- routes ---------------------------------------------------------------------------

    async def _card_create(self, request: web.Request) -> web.Response:
        call, fault = await self._cardkit_call(request, "card.create")
        if fault is None:
            body = call.body or {}
            problem = "type must be card_json" if body.get("type") != "card_json" else None
            problem = problem or card_problem(body.get("data"))
            if problem:
                fault = self._error(INVALID, problem)
            else:
                card_id = str(7_000_000_000_000_000_000 + secrets.randbelow(10**18))
                entity = CardEntity(card_id, json.loads(body["data"]))
                self.cards[card_id] = entity
                self._card_changed(entity)
                fault = self._envelope({"card_id": card_id})  # type: ignore[attr-defined]
        await self._notify()  # type: ignore[attr-defined]
        return fault

    async def _card_content(self, request: web.Request) -> web.Response:
        call, fault = await self._cardkit_call(request, "card.content")
        if fault is None:
            card, fault = self._sequenced(request.match_info["card_id"], call.body)
            content = (call.body or {}).get("content")
            if card is not None:
                element = card.element(request.match_info["element_id"])
                streaming = (card.card.get("config") or {}).get("streaming_mode")
                if element is None or element.get("tag") not in ("markdown", "plain_text"):
                    fault = self._error(INVALID, "no text element with this element_id")
                elif not isinstance(content, str):
                    fault = self._error(INVALID, "content is required")
                elif not streaming:
                    fault = self._error(NOT_STREAMING, "the card is not in streaming mode")
                else:
                    card.sequence = call.body["sequence"]
                    element["content"] = content
                    card.streamed.append(content)
                    self._card_changed(card)
                    fault = self._envelope({})  # type: ignore[attr-defined]
        await self._notify()  # type: ignore[attr-defined]
        return fault

    async def _card_update(self, request: web.Request) -> web.Response:
        call, fault = await self._cardkit_call(request, "card.update")
        if fault is None:
            card, fault = self._sequenced(request.match_info["card_id"], call.body)
            new = (call.body or {}).get("card") or {}
            if card is not None:
                problem = "type must be card_json" if new.get("type") != "card_json" else None
                problem = problem or card_problem(new.get("data"))
                if problem:
                    fault = self._error(INVALID, problem)
                else:
                    card.sequence, card.card = call.body["sequence"], json.loads(new["data"])
                    self._card_changed(card)
                    fault = self._envelope({})  # type: ignore[attr-defined]
        await self._notify()  # type: ignore[attr-defined]
        return fault

    async def _card_settings(self, request: web.Request) -> web.Response:
        call, fault = await self._cardkit_call(request, "card.settings")
        if fault is None:
            card, fault = self._sequenced(request.match_info["card_id"], call.body)
            if card is not None:
                try:
                    settings = json.loads((call.body or {}).get("settings") or "")
                except ValueError:
                    settings = None
                if not isinstance(settings, dict):
                    fault = self._error(INVALID, "settings must be a JSON object")
                else:
                    card.sequence = call.body["sequence"]
                    card.card.setdefault("config", {}).update(settings.get("config") or {})
                    self._card_changed(card)
                    fault = self._envelope({})  # type: ignore[attr-defined]
        await self._notify()  # type: ignore[attr-defined]
        return fault
