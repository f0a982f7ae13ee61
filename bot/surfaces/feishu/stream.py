"""The answer streamed into a Feishu thread: a CardKit card entity whose markdown element is
streamed (create the card, reply with its card_id, push the whole text so far with a rising
`sequence`; Feishu types out what is new).

The `PacedStream` (bot/chat/streaming.py) sends at most once a second (Feishu allows 10
operations a second per card). `finish` replaces the card whole: the answer as the plain post
renders it, streaming mode off, the feedback buttons under it (a long answer's further cards
follow as replies, the last one carrying the buttons). So a broken synthesis' fallback replaces
the partial text in the same card, never beside it. An app without CardKit (its scope missing:
code 99991672) is remembered per tenant and its answers are posted once; a tenant's first card
is its probe: answers streaming at the same moment wait for its outcome, so such an app is tried
once, not once per concurrent answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnswerFile
from bot.surfaces.feishu.agent_cards import STREAM_ELEMENT, stream_card, with_feedback
from bot.surfaces.feishu.limits import wire_bytes
from bot.surfaces.feishu.render import answer_cards, defuse
from bot.surfaces.feishu.send import FeishuAPIError

if TYPE_CHECKING:
    from bot.surfaces.feishu.surface import FeishuSurface

log = logging.getLogger(__name__)

# Feishu's "the app has not been granted a scope this API needs" (cardkit:card:write here)
UNAVAILABLE_CODES = frozenset({99991672})
STREAM_CAPACITY = 8_000  # characters streamed into the card (the rest comes at `finish`)
STREAM_MAX_BYTES = 24_000  # what one content update may carry on the wire (30 KB requests)


class StreamingUnavailable(FeishuAPIError):
    """Another answer's probe found that this tenant's app cannot stream."""


class TenantFeatures:
    """Tenants whose app cannot stream (no CardKit scope): remembered, logged once."""

    def __init__(self) -> None:
        self._off: set[str] = set()
        self._streamed: set[str] = set()  # tenants whose app has made a card: no probe
        self._probes: dict[str, asyncio.Lock] = {}

    def streams(self, tenant: str) -> bool:
        return tenant not in self._off

    @asynccontextmanager
    async def first_card(self, tenant: str) -> AsyncIterator[None]:
        """Around making an answer's card: until one card of the tenant's was made, one at a
        time, so the others learn a refusal instead of each trying (`StreamingUnavailable`)."""
        if tenant in self._streamed:
            yield
            return
        async with self._probes.setdefault(tenant, asyncio.Lock()):
            if tenant in self._off:
                raise StreamingUnavailable("card.create", None, "streaming is off", None)
            try:
                yield
            except FeishuAPIError as exc:  # told before the next answer looks
                self.refused(tenant, exc)
                raise
            self._streamed.add(tenant)
            self._probes.pop(tenant, None)

    def refused(self, tenant: str, exc: FeishuAPIError) -> bool:
        if exc.code not in UNAVAILABLE_CODES:
            return False
        if tenant not in self._off:
            self._off.add(tenant)
            log.warning(
                "feishu: streaming answers is not available for tenant %s (code %s: grant the "
                "app cardkit:card:write); answers are posted once from now on", tenant, exc.code,
            )  # fmt: skip
        return True


class FeishuStream:
    """One streamed answer card (the `StreamTransport` of bot/chat/streaming.py)."""

    capacity = STREAM_CAPACITY

    def __init__(self, surface: FeishuSurface, thread: ThreadRef) -> None:
        self._surface = surface
        self._sender = surface.sender
        self._thread = thread
        self.card_id: str | None = None
        self.message_id: str | None = None
        self._sequence = 0
        self.calls = 0

    def _next(self) -> int:
        self._sequence += 1
        return self._sequence

    async def send(self, shown: str, new: str) -> None:
        text = defuse(shown)
        if wire_bytes(text) > STREAM_MAX_BYTES:
            raise ValueError("the streamed text outgrew one card update")
        if self.card_id is None:
            self.calls += 2
            try:
                async with self._surface.features.first_card(self._thread.workspace):
                    self.card_id = await self._sender.create_card(stream_card(shown))
                entity = {"type": "card", "data": {"card_id": self.card_id}}
                self.message_id = await self._sender.reply(self._thread.root, "interactive", entity)
            except FeishuAPIError as exc:
                self._surface.features.refused(self._thread.workspace, exc)
                raise
            return
        self.calls += 1
        await self._sender.stream_text(self.card_id, STREAM_ELEMENT, text, self._next())

    async def finish(
        self,
        answer: str,
        *,
        streamed: str,
        intact: bool,
        files: Sequence[AnswerFile],
        feedback_run: str,
    ) -> MessageRef:
        surface, thread = self._surface, self._thread
        if self.card_id is None or self.message_id is None:
            return await surface.post_answer(thread, answer, files=files, feedback_run=feedback_run)
        cards = answer_cards(answer)
        if feedback_run:
            cards[-1] = with_feedback(cards[-1])
        try:
            self.calls += 1
            await self._sender.update_card(self.card_id, cards[0], self._next())
        except FeishuAPIError as exc:  # the card stays as it was streamed; the answer follows
            log.warning("feishu refused to finish the streamed card (code %s)", exc.code)
            return await surface.post_answer(thread, answer, files=files, feedback_run=feedback_run)
        last = MessageRef(thread, self.message_id)
        for card in cards[1:]:
            last = MessageRef(thread, await self._sender.reply(thread.root, "interactive", card))
        await surface.attach_all(thread, files)
        return last

    async def abandon(self, streamed: str, note: str) -> None:
        if self.card_id is None:
            return
        card = answer_cards(f"{streamed}\n\n_{note}_")[0]
        self.calls += 1
        await self._sender.update_card(self.card_id, card, self._next())
