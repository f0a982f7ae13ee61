"""The direct audit command in chat: `/chatops-audit 7d [connector]` (Slack) and
`audit 7d [connector]` addressed to the bot (Feishu), answered without the model.

Platform-neutral: a surface calls `handle_audit_command` with the sender's verified user id, the
text and where it was asked; it gets back a report to show the viewer privately (or to post
there, when they say `share`: then it covers only what may be shown there), or a private
message (not allowed, or a usage error). Only users listed in `CHATOPS_AUDIT_VIEWERS` (or in the
workspace's `audit_viewers`, `CHATOPS_WORKSPACES_FILE`) may see reports in chat.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from bot.audit.report import DEFAULT_WINDOW, AuditQuery, parse_duration, report_for
from bot.chat.audit_report import USAGE, AuditChatReply, Place
from bot.chat.workspaces import WorkspacePolicies
from bot.clock import utcnow
from bot.config import Settings
from bot.errors import AuditError
from bot.storage.database import Database

KEYWORD = "audit"
SHARE = "share"
NOT_ALLOWED = (
    "You are not allowed to see audit reports here. Ask an operator to add your user id to "
    "CHATOPS_AUDIT_VIEWERS (or to this workspace's audit_viewers)."
)
# Slack `<@U123>` / `<@U123|name>`, Feishu `@_user_1`, and a leading plain `@bot`
_MENTION = re.compile(r"^(?:<@[^>]+>|@\S+)\s*")
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


class AuditCommandError(AuditError, ValueError):
    """The text is an audit command, but its arguments are wrong; the message says how."""


def _strip_mentions(text: str) -> str:
    text = text.strip()
    while True:
        stripped = _MENTION.sub("", text, count=1)
        if stripped == text:
            return text
        text = stripped


def parse_audit_command(text: str, *, now: datetime | None = None) -> AuditQuery | None:
    """`audit 7d [connector [action]]` or slash text `7d [connector [action]]` -> a query.

    Returns None when the text is not an audit command (anything not starting with the word
    `audit` or a window such as `7d`; also empty text, which a slash command should send as
    "audit"). Raises `AuditCommandError` when it is one but its arguments are wrong.
    """
    words = _strip_mentions(text).split()
    if not words:
        return None
    if words[0].lower() == KEYWORD:
        args = words[1:]
    elif parse_duration(words[0]) is not None:
        args = words
    else:
        return None
    window = DEFAULT_WINDOW
    if args and parse_duration(args[0]) is not None:
        window, args = args[0], args[1:]
    elif args and args[0][:1].isdigit():
        raise AuditCommandError(f"bad window {args[0]!r}: use 30m, 12h, 7d or 4w. {USAGE}")
    if len(args) > 2 or any(_NAME.match(a) is None for a in args):
        raise AuditCommandError(f"I don't understand {' '.join(args)!r}. {USAGE}")
    connector = args[0] if args else None
    action = args[1] if len(args) > 1 else None
    if connector and "__" in connector and action is None:
        connector, action = connector.split("__", 1)
    try:
        return AuditQuery.window(window, now=now or utcnow(), connector=connector, action=action)
    except ValueError as exc:
        raise AuditCommandError(f"{exc}. {USAGE}") from None


def can_view(
    settings: Settings,
    user_id: str,
    *,
    place: tuple[str, str] | None = None,
    workspaces: WorkspacePolicies | None = None,
) -> bool:
    """Only listed users see reports in chat (empty: nobody): the `audit_viewers` of the
    workspace `place` (platform, workspace) is in, else `CHATOPS_AUDIT_VIEWERS`. A viewer of
    one workspace is nobody in another that lists its own."""
    if place is None or workspaces is None:
        return bool(user_id) and user_id in settings.audit_viewers
    policy = workspaces.for_workspace(*place)
    return policy.may_view_audit(settings.audit_viewers, user_id)


def in_workspace(query: AuditQuery, place: Place, settings: Settings) -> AuditQuery:
    """A report asked in a workspace (a Slack team, a Feishu tenant) covers that workspace
    alone, shared or not, when the deployment serves several of its platform (Slack OAuth
    installs, a Feishu apps file): no viewer list reaches across them. With one Slack token or
    one Feishu app it covers every workspace, as it always has."""
    if not settings.serves_several_workspaces(place.platform):
        return query
    return query.model_copy(update={"platform": place.platform, "workspace": place.workspace})


def scoped(
    query: AuditQuery, settings: Settings, people: Sequence[str], place: Place
) -> AuditQuery:
    """What a report may cover where it is shown. In a direct message, everything the viewer
    asked for. In a channel, where everyone there reads it: only that channel's calls unless
    everyone it is shown for is in `CHATOPS_AUDIT_ALL_CHANNELS_VIEWERS`, and never a direct
    message's arguments (its calls are counted, their arguments and errors left out)."""
    query = in_workspace(query, place, settings)
    if place.direct:
        return query
    update: dict[str, object] = {"hide_direct": True}
    everywhere = settings.audit_all_channels_viewers
    if not people or not all(person in everywhere for person in people):
        update.update(platform=place.platform, channel=place.channel)
    return query.model_copy(update=update)


async def handle_audit_command(
    db: Database,
    settings: Settings,
    user_id: str,
    text: str,
    *,
    place: Place,
    now: datetime | None = None,
    workspaces: WorkspacePolicies | None = None,
) -> AuditChatReply | None:
    """Answer one chat audit command; None when `text` is not one (let the agent have it).

    The report is for the viewer alone unless the command says `share`; a shared report covers
    what may be shown at `place` (`scoped`). The permission check comes before parsing errors
    are shown, so an unauthorised user learns nothing but that they may not see reports.
    `workspaces`: whose `audit_viewers` apply where it was asked (None: the process-wide list).
    """

    def allowed() -> bool:
        where = (place.platform, place.workspace)
        return can_view(settings, user_id, place=where, workspaces=workspaces)

    words = text.split()
    shared = any(word.lower() == SHARE for word in words)
    text = " ".join(word for word in words if word.lower() != SHARE)
    try:
        query = parse_audit_command(text, now=now)
    except AuditCommandError as exc:
        if not allowed():
            return AuditChatReply(kind="not_allowed", message=NOT_ALLOWED)
        return AuditChatReply(kind="usage", message=str(exc))
    if query is None:
        return None
    if not allowed():
        return AuditChatReply(kind="not_allowed", message=NOT_ALLOWED)
    query = in_workspace(query, place, settings)
    if shared:
        query = scoped(query, settings, [user_id], place)
    report = await report_for(db, query, now=now)
    return AuditChatReply(kind="report", report=report, shared=shared)
