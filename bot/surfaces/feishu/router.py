"""Several Feishu apps as one surface: each thread's messages, cards and edits go through the
client of the app that serves its tenant (`apps.app_for_tenant`).

The runtime knows one surface per platform; `FeishuApps` is the `feishu` one. It holds one
`FeishuSurface` per app (each with its own lark-oapi client, token, webhook checks and
callbacks) and picks the app by the thread's workspace, the tenant key: a thread of a tenant no
app serves fails with a `SurfaceError` rather than going out with another app's token. Stored
messages coming back from the inbox (after a restart too) are handed to the same app.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.chat.audit_report import AuditReport
from bot.chat.ports import InboxPort
from bot.chat.questions import QuestionView
from bot.chat.streaming import StreamTransport
from bot.chat.surface import AuditReportPoster
from bot.chat.threads import InboundMessage, MessageRef, ThreadRef
from bot.chat.views import AnswerFile, ApprovalCardView, CardPlace, StatusView
from bot.errors import SurfaceError
from bot.surfaces.feishu.apps import app_for_tenant
from bot.surfaces.feishu.events import PLATFORM
from bot.surfaces.feishu.surface import FeishuSurface


class FeishuApps:
    """The `Surface` for every configured Feishu app; delegates by tenant."""

    platform = PLATFORM
    status_edit_interval_s = None  # the run manager's: Feishu limits edits per message
    direct_messages = True

    def __init__(self, surfaces: Sequence[FeishuSurface], inbox: InboxPort) -> None:
        """`surfaces`: one per app, the FEISHU_* app first when configured; `inbox`: whose
        stored Feishu messages this router hands to the app of their tenant."""
        if not surfaces:
            raise ValueError("FeishuApps needs at least one app")
        self.surfaces = tuple(surfaces)
        self._apps = tuple(s.app for s in self.surfaces)
        self._by_name = {s.app.name: s for s in self.surfaces}
        inbox.route_messages(self.platform, self._on_message)

    def for_tenant(self, tenant: str) -> FeishuSurface:
        """The surface of the app serving `tenant` (SurfaceError when none does)."""
        app = app_for_tenant(self._apps, tenant)
        if app is None:
            raise SurfaceError(f"no Feishu app serves tenant {tenant!r}")
        return self._by_name[app.name]

    def _of(self, thread: ThreadRef) -> FeishuSurface:
        return self.for_tenant(thread.workspace)

    async def wait_idle(self, timeout: float) -> None:  # noqa: ASYNC109 - like the surface's
        for surface in self.surfaces:
            await surface.wait_idle(timeout)

    async def _on_message(self, message: InboundMessage, inbox_id: int) -> None:
        await self._of(message.thread).on_message(message, inbox_id)

    # ------------------------------------------------------------------ Surface

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        return await self._of(thread).post_status(thread, view)

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        await self._of(ref.thread).update_status(ref, view)

    async def open_answer_stream(
        self, thread: ThreadRef, *, recipient: str
    ) -> StreamTransport | None:
        return await self._of(thread).open_answer_stream(thread, recipient=recipient)

    async def post_approval_card(self, thread: ThreadRef, view: ApprovalCardView) -> MessageRef:
        return await self._of(thread).post_approval_card(thread, view)

    async def update_approval_card(self, ref: MessageRef, view: ApprovalCardView) -> None:
        await self._of(ref.thread).update_approval_card(ref, view)

    async def post_question(self, thread: ThreadRef, view: QuestionView) -> MessageRef:
        return await self._of(thread).post_question(thread, view)

    async def update_question(self, ref: MessageRef, view: QuestionView) -> None:
        await self._of(ref.thread).update_question(ref, view)

    async def thread_link(self, thread: ThreadRef) -> str:
        return await self._of(thread).thread_link(thread)

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        return await self.for_tenant(place.workspace).post_approval_copy(place, view)

    async def post_routed_notice(
        self, thread: ThreadRef, places: Sequence[CardPlace]
    ) -> MessageRef:
        return await self._of(thread).post_routed_notice(thread, places)

    async def post_answer(
        self,
        thread: ThreadRef,
        markdown: str,
        *,
        files: Sequence[AnswerFile] = (),
        feedback_run: str = "",
    ) -> MessageRef:
        return await self._of(thread).post_answer(
            thread, markdown, files=files, feedback_run=feedback_run
        )

    async def attach_all(self, thread: ThreadRef, files: Sequence[AnswerFile]) -> None:
        await self._of(thread).attach_all(thread, files)

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        return await self._of(thread).post_notice(thread, text, mention=mention)

    async def open_thread(self, channel: str, workspace: str, text: str) -> ThreadRef:
        return await self.for_tenant(workspace).open_thread(channel, workspace, text)

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        await self._of(thread).notify_user(thread, user_id, text)

    @property
    def report_poster(self) -> AuditReportPoster:
        return self

    async def post_audit_report(
        self,
        channel: str,
        report: AuditReport,
        *,
        thread: ThreadRef | None = None,
        workspace: str = "",
    ) -> MessageRef:
        """In a thread: through its app; in a chat of a named tenant (scheduled reports):
        through that tenant's app; a chat named by id alone: through the FEISHU_* app, else the
        first app of the file."""
        if thread is not None:
            surface = self._of(thread)
        else:
            surface = self.for_tenant(workspace) if workspace else self.surfaces[0]
        return await surface.post_audit_report(channel, report, thread=thread)
