"""A tool's question to the people of a run (an MCP server's elicitation), in no platform's markup.

A server may ask for input in the middle of a call. The elicitation feature (`bot.elicitation`)
builds the form from the requested schema and posts it in the run's thread through a surface
that can show one (`QuestionPoster`); the answer comes back through the `Questions` port. It is
not an approval: its ids, its port and its store are its own, and an answer only ever goes back
to the server that asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from bot.chat.forms import FormField
from bot.chat.threads import MessageRef, ThreadRef

QuestionAction = Literal["accept", "decline", "cancel"]
ACTIONS: tuple[QuestionAction, ...] = ("accept", "decline", "cancel")
# open: waiting for an answer; the rest: how it ended (timed out and stopped runs: cancelled)
QuestionState = Literal["open", "accepted", "declined", "cancelled"]
AnswerStatus = Literal["answered", "invalid", "unauthorized", "not_found", "closed"]


@dataclass(frozen=True, kw_only=True)
class QuestionView:
    """The form: who asks (`asker`, the connector: it is the server's question, not the
    bot's), its message, one field per property of the requested schema, who may answer."""

    question_id: str
    asker: str
    message: str
    fields: tuple[FormField, ...]
    requesters: tuple[str, ...]
    state: QuestionState = "open"
    answered_by: str = ""


@dataclass(frozen=True)
class AnswerResult:
    """What became of an answer: `answered`, or why not (`errors` by field for `invalid`)."""

    status: AnswerStatus
    message: str = ""
    errors: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class QuestionPoster(Protocol):
    """A surface that can show a question's form in a thread (the console, Slack, Feishu)."""

    async def post_question(self, thread: ThreadRef, view: QuestionView) -> MessageRef: ...

    async def update_question(self, ref: MessageRef, view: QuestionView) -> None: ...


class Questions(Protocol):
    """The port a surface answers a question through: accept (with the form's fields as
    text), decline or cancel, for a verified user on its platform; `form` hands one of the
    question's requesters its form (a surface that opens it on a click: a Slack modal)."""

    async def form(
        self, question_id: str, user_id: str, *, platform: str
    ) -> QuestionView | AnswerResult: ...

    async def answer(
        self,
        question_id: str,
        user_id: str,
        action: QuestionAction,
        values: Mapping[str, str | None] | None = None,
        *,
        platform: str,
    ) -> AnswerResult: ...
