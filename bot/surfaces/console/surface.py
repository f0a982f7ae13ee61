"""The local web console as a `Surface`: what the runtime posts, kept in the database, pushed live.

Every message of a console thread is an item of the console's store (`ports.ItemStore`, the
database): the user's own messages (stored before they are dispatched, so the run they start
comes after them), status messages, approval cards, answers and notices, each in its latest
state. Every change is the store's next event (`seq`); browsers follow them over SSE
(`stream.py`) and resume from the last one they saw. A run's live events (steps, the answer as
it streams) go out as they happen and are not kept: the items hold the lasting state, and a
browser that reconnects mid-answer gets the text streamed so far.

Who may reach it is `guard.py`'s job. The console decides only approvals whose card it posted
itself (the broker refuses the others).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from bot.chat.events import RunEvent
from bot.chat.questions import QuestionView
from bot.chat.text import grant_button_label, grant_note
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import (
    AnswerFile,
    AnyCardView,
    ApprovalCardView,
    BatchCardView,
    CardPlace,
    StatusView,
)
from bot.runs.frames import run_event_frame
from bot.statuses import ApprovalStatus, RunStatus
from bot.surfaces.console.files import ConsoleFiles
from bot.surfaces.console.markdown import AnswerRenderer
from bot.surfaces.console.ports import Item, ItemStore, Thread

log = logging.getLogger(__name__)

PLATFORM = "console"
WORKSPACE = "local"
CHANNEL = "console"
DEFAULT_USER = "console-user"
BATCH_DECIDED = "decided"  # a batch card's state once every call of it ended
APPROVALS_ROOT = "approvals"  # routed cards: the approvals view, not a conversation
APPROVALS_VIEW = ThreadRef(PLATFORM, WORKSPACE, CHANNEL, APPROVALS_ROOT)
FINAL_STATES = (RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED)
MAX_LIVE_ANSWERS = 200  # answers streaming at once (an unfinished one is dropped oldest first)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def as_json(data: dict[str, Any]) -> dict[str, Any]:
    """`data` as plain JSON types (datetimes as ISO strings), as stored and sent."""
    return json.loads(json.dumps(data, default=_jsonable))


@dataclass(frozen=True)
class Outgoing:
    """One SSE event: an `item` (its latest state, `seq` its event id), or a run's live event
    on its seed channel (`seq` None: not kept, not replayed)."""

    event: str
    data: dict[str, Any]
    seq: int | None = None


def thread_json(thread: Thread) -> dict[str, Any]:
    return {
        "root": thread.root,
        "title": thread.title,
        "state": thread.state,
        "pending": thread.pending,
        "seq": thread.seq,
        "created": thread.created_at.isoformat(),
        "updated": thread.updated_at.isoformat(),
        "hidden": thread.hidden,
    }


def item_json(item: Item, thread: Thread | None = None) -> dict[str, Any]:
    """An item as the page gets it; `summary`: its thread's sidebar row after this change."""
    return {
        "id": item.id,
        "thread": item.root,
        "kind": item.kind,
        "state": item.state,
        "seq": item.seq,
        "position": item.position,
        "at": item.created_at.isoformat(),
        "updated": item.updated_at.isoformat(),
        "data": item.data,
        "summary": thread_json(thread) if thread is not None else None,
    }


def item_event(item: Item, thread: Thread | None = None) -> Outgoing:
    return Outgoing("item", item_json(item, thread), item.seq)


@dataclass
class LiveAnswer:
    """An answer streaming in: its thread, and the text so far."""

    root: str
    text: str = ""


class ConsoleSurface:
    """The console's items, their SSE subscribers and the answers streaming now.

    Each subscriber's queue is bounded: a browser that stops reading is disconnected (it
    reconnects and resumes from its last event).
    """

    platform = PLATFORM
    report_poster = None  # no channels: scheduled audit reports go to Slack or Feishu
    status_edit_interval_s = 0.0  # no platform rate limit: every step is shown as it happens
    direct_messages = False  # no user identities: nobody to write to alone

    def __init__(self, store: ItemStore, *, queue_size: int = 1000) -> None:
        self.store = store
        self.files = ConsoleFiles()  # the answers' documents
        self.answers = AnswerRenderer()
        self._subscribers: set[asyncio.Queue[Outgoing | None]] = set()
        self._queue_size = queue_size
        self._live: OrderedDict[str, LiveAnswer] = OrderedDict()  # run id -> answer so far
        self._closed = False

    # -- subscribers ----------------------------------------------------------------------
    def subscribe(self) -> tuple[asyncio.Queue[Outgoing | None], list[Outgoing]]:
        """A queue of what happens from now on, and the answers streaming now (as `reset`
        frames holding their text so far): taken together, so no delta is in both."""
        queue: asyncio.Queue[Outgoing | None] = asyncio.Queue(self._queue_size)
        if self._closed:
            queue.put_nowait(None)
        self._subscribers.add(queue)
        live = [
            Outgoing("answer", {"status": "reset", "content": answer.text, "run_id": run_id,
                                "thread": answer.root,
                                "html": self.answers.live_html(answer.text)})
            for run_id, answer in self._live.items()
        ]  # fmt: skip
        return queue, live

    def unsubscribe(self, queue: asyncio.Queue[Outgoing | None]) -> None:
        self._subscribers.discard(queue)

    def close(self) -> None:
        """End every SSE stream (server shutdown)."""
        self._closed = True
        for queue in list(self._subscribers):
            self._end(queue)

    def _end(self, queue: asyncio.Queue[Outgoing | None]) -> None:
        self._subscribers.discard(queue)
        while True:
            try:
                queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                queue.get_nowait()

    def _broadcast(self, outgoing: Outgoing) -> None:
        for queue in list(self._subscribers):
            try:
                queue.put_nowait(outgoing)
            except asyncio.QueueFull:
                log.warning("console: a browser stopped reading events; disconnecting it")
                self._end(queue)

    # -- items ----------------------------------------------------------------------------
    async def publish(
        self,
        item_id: str,
        thread: ThreadRef,
        kind: str,
        data: dict[str, Any],
        *,
        state: str = "",
        title: str = "",
        create_only: bool = False,
    ) -> Outgoing | None:
        """Store the item's new state (the next event), then tell every browser; None when
        `create_only` found it already there."""
        saved = await self.store.save(
            item_id, thread.root, kind, as_json(data), state=state, title=title,
            create_only=create_only,
        )  # fmt: skip
        if saved is None:
            return None
        outgoing = item_event(*saved)
        if kind == "answer" or (kind == "status" and state in FINAL_STATES):
            self._drop_live(thread.root)
        self._broadcast(outgoing)
        return outgoing

    def thread_changed(self, thread: Thread) -> None:
        """A conversation renamed or deleted: every page's sidebar follows at once (live only:
        a page that reconnects reads the sidebar again)."""
        self._broadcast(Outgoing("thread", thread_json(thread)))

    async def post_user_message(
        self, thread: ThreadRef, item_id: str, text: str, user: str
    ) -> bool:
        """The user's message in its thread, before it is dispatched (so whatever it starts
        comes after it); False when this message id is there already (sent twice)."""
        data = {"text": text, "author": user, "outcome": "sending"}
        created = await self.publish(item_id, thread, "message", data, title=text, create_only=True)
        return created is not None

    async def acknowledge(
        self, thread: ThreadRef, item_id: str, text: str, user: str, outcome: str
    ) -> None:
        """What became of a user's message: `started` a run, an `interrupt` the run reads
        before its next step, `busy`, `limited` (its author's per-person cap), or `failed`
        (not taken: sending again retries it)."""
        data = {"text": text, "author": user, "outcome": outcome}
        await self.publish(item_id, thread, "message", data)

    # -- live run events (not kept: the items hold the lasting state) ----------------------
    async def on_run_event(self, run_id: str, thread: ThreadRef, event: RunEvent) -> None:
        """RunManager listener: console runs' events go out in the seed's protocol (`{type,
        status}` objects on the `step`, `answer`, `compact`, `phase`, `inject` and `done`
        channels), each with its run and thread; the answer's text so far is kept, and each
        `answer` frame carries it as `html` (`AnswerRenderer.live_html`: the same sanitiser)."""
        if thread.platform != self.platform:
            return  # another surface's run
        root = thread.root
        frame = run_event_frame(event)
        data = as_json({**frame.data, "run_id": run_id, "thread": root})
        if frame.channel == "answer":
            self._follow_answer(run_id, root, data)
            if run_id in self._live:  # the text so far, rendered and sanitised as the answer
                data["html"] = self.answers.live_html(self._live[run_id].text)
        elif frame.channel == "done":
            self._live.pop(run_id, None)
        self._broadcast(Outgoing(frame.channel, data))

    def _follow_answer(self, run_id: str, root: str, data: dict[str, Any]) -> None:
        status = data.get("status")
        if status == "start":
            self._live[run_id] = LiveAnswer(root)
            while len(self._live) > MAX_LIVE_ANSWERS:
                self._live.popitem(last=False)
        elif status in ("delta", "reset") and run_id in self._live:
            answer = self._live[run_id]
            content = str(data.get("content") or "")
            answer.text = answer.text + content if status == "delta" else content

    def _drop_live(self, root: str) -> None:
        for run_id in [r for r, answer in self._live.items() if answer.root == root]:
            del self._live[run_id]

    def _new_ref(self, thread: ThreadRef) -> MessageRef:
        return MessageRef(thread=thread, message_id=uuid.uuid4().hex)

    # -- Surface protocol ---------------------------------------------------------------
    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        ref = self._new_ref(thread)
        await self.update_status(ref, view)
        return ref

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        await self.publish(ref.message_id, ref.thread, "status", asdict(view), state=view.state)

    async def post_approval_card(self, thread: ThreadRef, view: AnyCardView) -> MessageRef:
        ref = self._new_ref(thread)
        await self.update_approval_card(ref, view)
        return ref

    async def update_approval_card(self, ref: MessageRef, view: AnyCardView) -> None:
        """One call's card (`approval`), or a batch's (`approval_batch`: its calls in
        `items`, each as a card's data; pending while any call waits, then `decided`)."""
        if isinstance(view, BatchCardView):
            data = batch_data(view)
            state = BATCH_DECIDED if view.ended else ApprovalStatus.PENDING
            await self.publish(ref.message_id, ref.thread, "approval_batch", data, state=state)
            return
        await self.publish(
            ref.message_id, ref.thread, "approval", approval_data(view), state=view.state
        )

    async def post_answer(
        self,
        thread: ThreadRef,
        markdown: str,
        *,
        files: Sequence[AnswerFile] = (),
        feedback_run: str = "",
    ) -> MessageRef:
        """The answer: its Markdown, the sanitised HTML the page shows, a link per document,
        and the run its thumbs rate (`POST /console/api/runs/{run_id}/feedback`)."""
        ref = self._new_ref(thread)
        links = [self.files.keep(file) for file in files]
        data = {
            "markdown": markdown,
            "html": self.answers.html(markdown),
            "files": links,
            "feedback_run": feedback_run,
        }
        await self.publish(ref.message_id, thread, "answer", data)
        return ref

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        ref = self._new_ref(thread)
        await self.publish(ref.message_id, thread, "notice", {"text": text, "mention": [*mention]})
        return ref

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        ref = self._new_ref(thread)
        await self.publish(ref.message_id, thread, "notice", {"text": text, "to": user_id})

    async def thread_link(self, thread: ThreadRef) -> str:
        return f"/c/{thread.root}"  # the page's address of the conversation

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        ref = self._new_ref(APPROVALS_VIEW)
        await self.update_approval_card(ref, view)
        return ref

    # -- QuestionPoster: a tool's question (MCP elicitation) as a dialog in the thread ------
    async def post_question(self, thread: ThreadRef, view: QuestionView) -> MessageRef:
        """A `question` item; the page answers it with `POST /console/api/questions/{id}`."""
        ref = self._new_ref(thread)
        await self.update_question(ref, view)
        return ref

    async def update_question(self, ref: MessageRef, view: QuestionView) -> None:
        await self.publish(ref.message_id, ref.thread, "question", asdict(view), state=view.state)

    async def post_routed_notice(self, thread: ThreadRef, _: Sequence[CardPlace]) -> MessageRef:
        ref = self._new_ref(thread)
        data = {"text": "Waiting for approval in the approvals view.", "link": "/approvals"}
        await self.publish(ref.message_id, thread, "notice", data)
        return ref


def batch_data(view: BatchCardView) -> dict[str, Any]:
    """A batch card as the page gets it: each call's card data, and whether Approve all is
    offered (the server still checks the clicker for every call)."""
    return {
        "batch_id": view.batch_id,
        "lead": view.pending[0].approval_id if view.pending else view.lead_approval_id,
        "approve_all_offered": view.approve_all_offered,
        "items": [approval_data(item) for item in view.items],
    }


def approval_data(view: ApprovalCardView) -> dict[str, Any]:
    """The card as the page gets it: the view, plus the grant sentence every surface shows."""
    return {**asdict(view), "grant_note": grant_note(view), "grant_label": grant_button_label(view)}
