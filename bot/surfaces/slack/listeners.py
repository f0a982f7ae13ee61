"""slack-bolt's app and its listeners: each event, click, dialog and command to `SlackInbound`.

`process_before_response=True`: bolt runs each listener inline (no untracked tasks of its own)
and acks after it returns, so what a listener stores is stored before Slack hears back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from bot.surfaces.slack.batch_card import APPROVE_ALL_ACTION, REJECT_ALL_ACTION
from bot.surfaces.slack.cards import (
    APPROVE_ACTION,
    APPROVE_COMMENT_ACTION,
    APPROVE_MODAL,
    APPROVE_THREAD_ACTION,
    CARD_DETAILS_ACTION,
    CHANGES_ACTION,
    CHANGES_MODAL,
    EDIT_ACTION,
    GRANT_MODAL,
    REJECT_ACTION,
    REJECT_MODAL,
)
from bot.surfaces.slack.edit_modal import EDIT_MODAL
from bot.surfaces.slack.oauth import SlackOAuth
from bot.surfaces.slack.question_card import (
    QUESTION_ANSWER_ACTION,
    QUESTION_DECLINE_ACTION,
    QUESTION_MODAL,
)
from bot.surfaces.slack.render import FEEDBACK_ACTION, STOP_ACTION

if TYPE_CHECKING:
    from bot.surfaces.slack.inbound import SlackInbound

log = logging.getLogger(__name__)


class _SameTokenNote(logging.Filter):
    """bolt reads SLACK_BOT_TOKEN from the environment by itself and, given our client, warns
    at every start that the token "will be unused": it is the client's own token. Dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


# bolt's framework log (the app's own messages about requests and listeners), under ours
BOLT_LOG = logging.getLogger(f"{__name__}.bolt")
BOLT_LOG.addFilter(_SameTokenNote())

AUDIT_COMMAND = "/chatops-audit"


def build_bolt_app(
    settings: Settings,
    inbound: SlackInbound,
    client: AsyncWebClient,
    *,
    oauth: SlackOAuth | None = None,
) -> AsyncApp:
    """The bolt app with our listeners. `process_before_response=True`: bolt runs each listener
    inline (no untracked tasks of its own) and answers after it; ours store, or spawn.
    `oauth`: OAuth installs (bolt authorizes each request with its team's installation)."""
    secret = settings.slack_signing_secret
    bolt = AsyncApp(
        name="chatops",  # without a name bolt walks the whole call stack (about a second)
        client=client,
        logger=BOLT_LOG,
        signing_secret=secret.get_secret_value() if secret else None,
        process_before_response=True,
        request_verification_enabled=True,
        oauth_flow=oauth.flow if oauth is not None else None,
    )

    @bolt.middleware
    async def for_this_installation(body: dict[str, Any], next: Any) -> Any:  # noqa: A002
        """Events, clicks and commands for another workspace, app or organisation are acked
        and dropped before any listener sees them."""
        problem = await inbound.request_problem(body)
        if problem is not None:
            log.warning("slack: request ignored: %s", problem)
            return BoltResponse(status=200, body="")
        return await next()

    @bolt.event("app_mention")
    async def app_mention(body: dict[str, Any], context: Any) -> None:
        await inbound.accept_event(body, context.bot_user_id or "")

    @bolt.event("message")
    async def message(body: dict[str, Any], context: Any) -> None:
        await inbound.accept_event(body, context.bot_user_id or "")

    async def click(ack: Any, body: dict[str, Any], action: dict[str, Any], context: Any) -> None:
        inbound.learn_bot_user(context.bot_user_id)
        await inbound.clicks.accept_click(body, action)  # stored before bolt sends the ack
        await ack()

    for action_id in (
        APPROVE_ACTION, REJECT_ACTION, APPROVE_THREAD_ACTION, APPROVE_COMMENT_ACTION, EDIT_ACTION,
        CHANGES_ACTION, APPROVE_ALL_ACTION, REJECT_ALL_ACTION,
    ):  # fmt: skip
        bolt.action(action_id)(click)

    @bolt.action(CARD_DETAILS_ACTION)
    async def details_clicked(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await inbound.clicks.accept_details(body, action)
        await ack()

    @bolt.action(STOP_ACTION)
    async def stop_clicked(ack: Any, body: dict[str, Any]) -> None:
        await inbound.controls.accept_stop_click(body)  # decided before bolt sends the ack
        await ack()

    @bolt.action(FEEDBACK_ACTION)
    async def feedback_clicked(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await inbound.controls.accept_feedback(body, action)  # stored before the ack
        await ack()

    async def question_clicked(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        inbound.questions.accept_click(body, action)  # on a task: never an approval
        await ack()

    bolt.action(QUESTION_ANSWER_ACTION)(question_clicked)
    bolt.action(QUESTION_DECLINE_ACTION)(question_clicked)

    @bolt.view(QUESTION_MODAL)
    async def question_submitted(ack: Any, body: dict[str, Any]) -> None:
        reply = await inbound.questions.accept_submission(body)  # checked, then answered
        await ack(**(reply or {}))

    @bolt.event("app_home_opened")
    async def home_opened(body: dict[str, Any], context: Any) -> None:
        await inbound.accept_event(body, context.bot_user_id or "")  # Socket Mode comes here

    @bolt.event("agent_session_stopped")
    async def session_stopped(body: dict[str, Any], context: Any) -> None:
        await inbound.accept_event(body, context.bot_user_id or "")  # Socket Mode comes here

    async def uninstalled(body: dict[str, Any], context: Any) -> None:
        await inbound.accept_event(body, context.bot_user_id or "")  # Socket Mode comes here

    bolt.event("app_uninstalled")(uninstalled)
    bolt.event("tokens_revoked")(uninstalled)

    @bolt.view(REJECT_MODAL)
    async def reject_submitted(ack: Any, body: dict[str, Any]) -> None:
        await inbound.clicks.accept_reject_submission(body)
        await ack()

    @bolt.view(CHANGES_MODAL)
    async def changes_submitted(ack: Any, body: dict[str, Any]) -> None:
        await inbound.clicks.accept_changes_submission(body)
        await ack()

    @bolt.view(EDIT_MODAL)
    async def edit_submitted(ack: Any, body: dict[str, Any]) -> None:
        reply = await inbound.clicks.accept_edit_submission(body)  # checked, then stored
        await ack(**(reply or {}))

    @bolt.view(APPROVE_MODAL)
    async def approve_submitted(ack: Any, body: dict[str, Any]) -> None:
        await inbound.clicks.accept_approve_submission(body)
        await ack()

    @bolt.view(GRANT_MODAL)
    async def grant_submitted(ack: Any, body: dict[str, Any]) -> None:
        await inbound.clicks.accept_grant_submission(body)
        await ack()

    @bolt.command(AUDIT_COMMAND)
    async def audit_command(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        inbound.on_audit_command(body)

    return bolt
