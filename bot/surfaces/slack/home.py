"""Slack's App Home as one approver's inbox: "Waiting for you", published with `views.publish`.

Each entry is a pending approval this person may approve now (the broker's `waiting_for`):
the card's details, a link to its card (chat.getPermalink), its age and expiry, and the card's
own buttons (same action ids and value): a click there is a `block_actions` whose container
is the view, handled by `SlackClicks` like a click on the card, and judged by the broker with
the same authority checks. The home is published when its owner opens the tab
(`app_home_opened`) and again whenever an approval that names them is asked or changes
(`refresh_inbox`, called by the card keeper), on whichever process made the change, in the
workspace the approval was asked in (with OAuth installs: that workspace's token and list).
Approvals anyone may decide refresh every home this process has published there (the latest
500 people).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from weakref import WeakValueDictionary

from cachetools import LRUCache
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.ports import Decisions
from bot.chat.waiting import WAITING_TITLE, WaitingApproval
from bot.errors import NotInstalled
from bot.surfaces.slack import routing
from bot.surfaces.slack.cards import (
    APPROVAL_BLOCK,
    approval_buttons,
    card_details,
    card_title,
)
from bot.surfaces.slack.markdown import escape
from bot.surfaces.slack.render import context, section

log = logging.getLogger(__name__)

PLATFORM = "slack"
HOME_SHOWN = 12  # entries a home shows in full (a view holds at most 100 blocks)
MAX_VIEWERS = 500  # people whose home this process keeps fresh for "anyone" approvals
MAX_LINKS = 2_000  # card links kept (chat.getPermalink once per card)
Blocks = list[dict[str, Any]]


def render_home(entries: Sequence[WaitingApproval], links: Sequence[str]) -> dict[str, Any]:
    """The home view: a header, then each waiting approval (details, link, age and expiry,
    buttons), oldest first; `links[i]` is entry i's card link ('' when there is none)."""
    blocks: Blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": WAITING_TITLE}},
    ]
    if not entries:
        blocks.append(section("Nothing is waiting for you."))
    for entry, link in zip(entries[:HOME_SHOWN], links, strict=False):
        view = entry.card
        blocks.append({"type": "divider"})
        blocks.append(section(f"*{escape(card_title(view))}*"))
        blocks += card_details(view)
        facts = [escape(entry.age_and_expiry())]
        if view.min_approvals > 1:
            facts.append(f"{view.approvals_so_far} of {view.min_approvals} approvals")
        if link:
            url = link.translate({ord(c): None for c in "<>|"})
            facts.append(f"<{url}|Open the card>")
        blocks.append(context(" \u00b7 ".join(facts)))
        blocks.append(approval_buttons(view, block_id=f"{APPROVAL_BLOCK}:{view.approval_id}"))
    if len(entries) > HOME_SHOWN:
        more = len(entries) - HOME_SHOWN
        blocks.append(context(f"and {more} more, oldest first: decide these to see the rest"))
    return {"type": "home", "blocks": blocks}


class SlackHome:
    """Publishes each person's App Home from the broker's list (see the module docstring).

    A refresh runs on tasks this object owns (a decision does not wait for anyone's home);
    one person's publications go one at a time, each reading the list when its turn comes,
    so a slow one never lands after a later one. A card's link is asked once and kept."""

    def __init__(
        self,
        client: Callable[[str], Awaitable[AsyncWebClient]],
        decisions: Decisions,
        *,
        per_workspace: bool = False,
    ) -> None:
        """`client`: the client of a workspace (its token); `per_workspace` (OAuth installs):
        a home lists only the approvals whose card is in its own workspace."""
        self.client = client
        self.per_workspace = per_workspace
        self.decisions = decisions
        # who opened their home, and in which workspace (the token it is published with)
        self._viewers: LRUCache[str, str] = LRUCache(MAX_VIEWERS)
        self._links: LRUCache[tuple[str, str], str] = LRUCache(MAX_LINKS)
        self._locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()
        self._tasks: set[asyncio.Task[None]] = set()

    async def publish(self, user_id: str, workspace: str | None = None) -> None:
        """`views.publish` of this person's inbox as it stands now (in `workspace`; None: the
        one they last opened it in)."""
        if workspace is None:
            workspace = self._viewers.get(user_id) or ""
        self._viewers[user_id] = workspace
        lock = self._locks.setdefault(user_id, asyncio.Lock())
        async with lock:
            entries = await self.decisions.waiting_for(
                user_id, platform=PLATFORM, workspace=workspace if self.per_workspace else None
            )
            if self.per_workspace:
                entries = [e for e in entries if _in(e, workspace)]
            links = [await self._link(entry) for entry in entries[:HOME_SHOWN]]
            client = await self.client(workspace)
            await client.views_publish(user_id=user_id, view=render_home(entries, links))

    async def refresh(self, users: Sequence[str] | None, *, workspace: str = "") -> None:
        """Publish again, on tasks of its own, for `users` (None: every home this process
        published); a failure is logged, never raised. `workspace`: where the approval that
        changed was asked; with OAuth installs the homes are published there (with its token,
        listing its approvals), and "every home" means those last opened there."""
        where = workspace if self.per_workspace and workspace else None
        if users is None:
            users = [u for u, w in self._viewers.items() if where is None or w == where]
        for user in users:
            task = asyncio.get_running_loop().create_task(self._publish_logged(user, where))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def wait_idle(self) -> None:
        """Until every refresh started so far has ended (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Cancel and await the refreshes still running."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _publish_logged(self, user: str, workspace: str | None = None) -> None:
        try:
            await self.publish(user, workspace)
        except (SlackClientError, NotInstalled):
            log.warning("slack: the home of %s could not be published", user, exc_info=True)
        except Exception:  # noqa: BLE001 - the database down: the next change publishes again
            log.exception("slack: the home of %s could not be read", user)

    async def _link(self, entry: WaitingApproval) -> str:
        card = entry.posted_at
        if card is None or not card.thread.channel:
            return ""
        key = (card.thread.channel, card.message_id)
        if key in self._links:
            return self._links[key]
        try:
            link = await routing.permalink(await self.client(card.thread.workspace), *key)
        except (SlackClientError, NotInstalled):  # the entry still shows, without its link
            log.warning("slack: no link to approval %s's card", entry.card.approval_id)
            return ""
        self._links[key] = link
        return link


def _in(entry: WaitingApproval, workspace: str) -> bool:
    """The approval's card lives in `workspace` (one without a posted card: nowhere yet)."""
    return entry.posted_at is not None and entry.posted_at.thread.workspace == workspace
