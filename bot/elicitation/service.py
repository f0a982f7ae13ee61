"""Questions a tool asks mid-call, posted as a form in the run's thread and waited for.

`Elicitations.ask` is the run's `ask` port (`RunContext.ask`): it builds the form from the
requested schema, posts it through the thread's surface when that surface can show one
(`QuestionPoster`), and waits, bounded by `timeout_s`, for one of the call's requesters to
answer through `answer` (the surfaces' `Questions` port). The answer is checked against the
requested schema before the tool sees it. A question nobody answers in time, or one asked where
no form can be shown, is cancelled.

Questions live in this process's memory, like the call waiting on them: their ids are random
and their own (never an approval's), and nothing here can reach the approval broker, so whatever
a server asks and whatever is answered, no tool call is approved by it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace

from bot.approvals.forms import form_fields, parse_edit
from bot.chat.questions import (
    AnswerResult,
    QuestionAction,
    QuestionPoster,
    QuestionState,
    QuestionView,
)
from bot.chat.surface import Surface
from bot.chat.threads import MessageRef, ThreadRef
from bot.engine.tools import Question, Reply

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0
CLOSE_WAIT_S = 1.5  # how long an answer waits for its form to show it (then: in the background)
MAX_FIELDS = 20  # MCP asks for a flat form; a schema with more properties is refused
_ENDED: dict[QuestionAction, QuestionState] = {
    "accept": "accepted", "decline": "declined", "cancel": "cancelled",
}  # fmt: skip


NOT_FOUND = "There is no such open question."


@dataclass
class _Pending:
    """One open question: its form, where it was posted, the future its tool waits on."""

    view: QuestionView
    question: Question
    platform: str
    ref: MessageRef | None  # None until the surface has posted it
    poster: QuestionPoster
    reply: asyncio.Future[Reply]


class Elicitations:
    """The open questions of this process's runs, by id."""

    def __init__(
        self, surfaces: Mapping[str, Surface], *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        """`surfaces`: the run manager's, by platform (live: surfaces register later)."""
        self._surfaces = surfaces
        self.timeout_s = timeout_s
        self._open: dict[str, _Pending] = {}
        self._closing: set[asyncio.Task[None]] = set()  # form updates that outlived an answer

    def open_ids(self) -> list[str]:
        return list(self._open)

    async def ask(
        self, thread: ThreadRef, question: Question, requesters: tuple[str, ...]
    ) -> Reply:
        """Post the form in `thread` and wait for one of `requesters` to answer it."""
        surface = self._surfaces.get(thread.platform)
        if not isinstance(surface, QuestionPoster):
            log.info("a question from %s was cancelled: %s cannot show a form",
                     question.asker, thread.platform)  # fmt: skip
            return Reply("cancel")
        schema = question.schema
        properties = schema.get("properties")
        if (
            schema.get("type", "object") != "object"
            or not isinstance(properties, Mapping)
            or (len(properties) > MAX_FIELDS)
        ):
            log.info("a question from %s was cancelled: its schema is no flat form", question.asker)
            return Reply("cancel")
        view = QuestionView(
            question_id=secrets.token_hex(16),
            asker=question.asker,
            message=question.message,
            fields=form_fields(schema, {}),
            requesters=tuple(r for r in requesters if r),
        )
        pending = _Pending(
            view, question, thread.platform, None, surface,
            asyncio.get_running_loop().create_future(),
        )  # fmt: skip
        self._open[view.question_id] = pending  # open before it shows: a quick click finds it
        try:
            pending.ref = await surface.post_question(thread, view)
            if pending.reply.done():  # answered while it was being posted
                await self._show(pending)
            return await asyncio.wait_for(asyncio.shield(pending.reply), self.timeout_s)
        except TimeoutError:
            await self._close(pending, "cancel", "")
            return Reply("cancel")
        finally:
            if self._open.pop(view.question_id, None) is not None and not pending.reply.done():
                await self._close(pending, "cancel", "")  # the run was stopped meanwhile

    async def form(
        self, question_id: str, user_id: str, *, platform: str
    ) -> QuestionView | AnswerResult:
        """The open question's form, for one of its requesters on its platform (else why not)."""
        pending = self._open.get(question_id)
        refused = _refusal(pending, user_id, platform)
        if refused is not None or pending is None:
            return refused or AnswerResult("not_found", NOT_FOUND)
        return pending.view

    async def answer(
        self,
        question_id: str,
        user_id: str,
        action: QuestionAction,
        values: Mapping[str, str | None] | None = None,
        *,
        platform: str,
    ) -> AnswerResult:
        """One person's answer: only the call's requesters, on the question's platform, while
        it is open; an accept must fit the requested schema (else `invalid`, by field)."""
        pending = self._open.get(question_id)
        refused = _refusal(pending, user_id, platform)
        if refused is not None or pending is None:
            return refused or AnswerResult("not_found", NOT_FOUND)
        content: dict[str, object] | None = None
        if action == "accept":
            checked = parse_edit(pending.question.schema, {}, dict(values or {}))
            if not checked.ok or checked.arguments is None:
                return AnswerResult("invalid", checked.message(), dict(checked.errors))
            content = dict(checked.arguments)
        pending.reply.set_result(Reply(action, content))
        closing = asyncio.create_task(self._close(pending, action, user_id))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)
        try:  # a platform waits for its answer (Slack: 3 s): a slow edit goes on behind it
            await asyncio.wait_for(asyncio.shield(closing), CLOSE_WAIT_S)
        except TimeoutError:
            log.info("the form of question %s is still being updated", question_id)
        return AnswerResult("answered", f"Answered: {_ENDED[action]}.")

    async def _close(self, pending: _Pending, action: QuestionAction, user_id: str) -> None:
        """Show how the question ended on its form (best effort: the answer stands anyway)."""
        if not pending.reply.done():
            pending.reply.set_result(Reply(action))
        pending.view = replace(pending.view, state=_ENDED[action], answered_by=user_id)
        await self._show(pending)

    async def _show(self, pending: _Pending) -> None:
        if pending.ref is None:
            return  # not posted yet: `ask` shows it once it is
        try:
            await pending.poster.update_question(pending.ref, pending.view)
        except Exception:  # noqa: BLE001 - the form stays as it was; the tool has its answer
            log.warning("the form of question %s could not be updated", pending.view.question_id)


def _refusal(pending: _Pending | None, user_id: str, platform: str) -> AnswerResult | None:
    """Why `user_id` may not answer (None: they may): only the call's requesters, on the
    question's platform, while it is open."""
    if pending is None or pending.platform != platform:
        return AnswerResult("not_found", NOT_FOUND)
    if user_id not in pending.view.requesters:
        return AnswerResult("unauthorized", "Only the people who asked the bot may answer.")
    if pending.reply.done():
        return AnswerResult("closed", "This question was already answered.")
    return None
