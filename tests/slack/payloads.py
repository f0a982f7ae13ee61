"""Signed Slack requests and the literal payloads Slack sends (Events API, interactivity).

Signatures are real v0 HMACs made by slack_sdk's own `SignatureVerifier`, so bolt's request
verification checks them exactly as it checks Slack's.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID

SIGNING_SECRET = "test-signing-secret-0123456789abcdef"
CHANNEL = "C0OPS"
_ids = itertools.count(1)


def signed_headers(
    body: str, *, secret: str = SIGNING_SECRET, timestamp: int | None = None, retry: int = 0
) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    content_type = (
        "application/json" if body.startswith("{") else ("application/x-www-form-urlencoded")
    )
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=ts, body=body),
    }
    if retry:
        headers["X-Slack-Retry-Num"] = str(retry)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    return headers


def next_ts() -> str:
    return f"1710000000.{next(_ids):06d}"


def event_envelope(event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
    return {
        "token": "legacy-verification-token",
        "team_id": TEAM_ID,
        "api_app_id": "A0FAKE",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_ids):08d}",
        "event_time": int(time.time()),
        "authorizations": [
            {
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": False,
                "enterprise_id": None,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": "4-eyJldCI6ImFwcF9tZW50aW9uIn0",
    }


def mention(
    text: str,
    *,
    user: str = "U0DEV",
    channel: str = CHANNEL,
    ts: str | None = None,
    thread_ts: str | None = None,
    event_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An `app_mention` envelope; `text` gets the bot's mention in front, as Slack sends it.
    `extra` adds event fields (e.g. `edited`, which Slack sets when a mention is edited)."""
    ts = ts or next_ts()
    event: dict[str, Any] = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER_ID}> {text}",
        "ts": ts,
        "team": TEAM_ID,
        "channel": channel,
        "event_ts": ts,
        "client_msg_id": f"c-{ts}",
        **extra,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event_envelope(event, event_id=event_id)


def message(
    text: str,
    *,
    user: str = "U0DEV",
    channel: str = CHANNEL,
    ts: str | None = None,
    thread_ts: str | None = None,
    channel_type: str = "channel",
    event_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A `message` event envelope (channel reply, DM with channel_type="im", or a subtype)."""
    ts = ts or next_ts()
    event: dict[str, Any] = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts,
        "team": TEAM_ID,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
        **extra,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event_envelope(event, event_id=event_id)


def block_actions(
    card: dict[str, Any],
    action_id: str,
    *,
    user: str,
    channel: str = CHANNEL,
    user_team: str = TEAM_ID,
    team: str = TEAM_ID,
    app_id: str = "A0FAKE",
    message_ts: str | None = None,
    value: str | None = None,
) -> str:
    """The form-encoded body Slack posts when `user` clicks a button on the posted `card`.

    `user_team` is the clicker's own team (another one for a Slack Connect member of another
    organisation; `team` is then theirs too, as Slack sends it); `message_ts` forges the message
    the click claims to come from; `value` picks the button among those with `action_id` (a
    batch card has one Approve per call, each naming its approval)."""
    buttons = [
        *(e for b in card.get("blocks", []) if b.get("type") == "actions" for e in b["elements"]),
        *(b["accessory"] for b in card.get("blocks", []) if "accessory" in b),  # beside a line
    ]
    button = next(
        e for e in buttons if e.get("action_id") == action_id and value in (None, e.get("value"))
    )
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": user_team},
        "api_app_id": app_id,
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message_ts or card["ts"],
            "channel_id": channel,
            "is_ephemeral": False,
            "thread_ts": card.get("thread_ts"),
        },
        "trigger_id": f"{next(_ids)}.1234.abcdef",
        "team": {"id": team, "domain": "fake-team"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "ops"},
        "message": card,
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T0FAKE/1/abc",
        "actions": [
            {
                "action_id": action_id,
                "block_id": "chatops_approval",
                "text": button["text"],
                "value": button["value"],
                "style": button.get("style"),
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})


def feedback_click(
    message: dict[str, Any], rating: str, *, user: str, channel: str = CHANNEL,
    message_ts: str | None = None,
) -> str:  # fmt: skip
    """The body Slack posts when `user` presses thumbs up ("up") or down ("down") under an
    answer `message` (a `feedback_buttons` element in a `context_actions` block)."""
    element = next(
        e
        for b in message.get("blocks", [])
        if b.get("type") == "context_actions"
        for e in b["elements"]
        if e["type"] == "feedback_buttons"
    )
    button = element["positive_button" if rating == "up" else "negative_button"]
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0FAKE",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message_ts or message["ts"],
            "channel_id": channel,
            "is_ephemeral": False,
            "thread_ts": message.get("thread_ts"),
        },  # fmt: skip
        "trigger_id": f"{next(_ids)}.1234.abcdef",
        "team": {"id": TEAM_ID, "domain": "fake-team"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "ops"},
        "message": message,
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T0FAKE/1/abc",
        "actions": [
            {
                "type": "feedback_buttons",
                "action_id": element["action_id"],
                "block_id": "fb1",
                "text": button["text"],
                "value": button["value"],
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})


def session_stopped(
    *, user: str, thread_ts: str, channel: str = CHANNEL, streams: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Slack's `agent_session_stopped` event: `user` pressed the session's native stop."""
    ts = next_ts()
    event = {
        "type": "agent_session_stopped",
        "channel": channel,
        "user": user,
        "thread_ts": thread_ts,
        "streaming_message_ts": list(streams),
        "event_ts": ts,
    }
    return event_envelope(event)  # fmt: skip


def view_submission(view: dict[str, Any], *, user: str, reason: str | None) -> str:
    """The form-encoded body Slack posts when the reject modal `view` is submitted."""
    value = {"type": "plain_text_input", "value": reason}
    return submitted(view, {"reason": {"reason_input": value}}, user=user)


def grant_submission(view: dict[str, Any], *, user: str, grantees: list[str]) -> str:
    """The body Slack posts when the "approve for this thread" modal is submitted with the
    users picked in its multi-users select."""
    value = {"type": "multi_users_select", "selected_users": grantees}
    return submitted(view, {"grantees": {"grantees_input": value}}, user=user)


def submitted(view: dict[str, Any], values: dict[str, Any], *, user: str) -> str:
    """A `view_submission` of `view` with these state values."""
    payload = {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "fake-team"},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0FAKE",
        "token": "legacy-verification-token",
        "trigger_id": f"{next(_ids)}.1234.abcdef",
        "view": {**view, "state": {"values": values}},
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }
    return urlencode({"payload": json.dumps(payload)})


def slash_command(
    text: str, *, user: str, command: str = "/chatops-audit", channel: str = CHANNEL
) -> str:
    return urlencode(
        {
            "token": "legacy-verification-token",
            "team_id": TEAM_ID,
            "team_domain": "fake-team",
            "channel_id": channel,
            "channel_name": "ops",
            "user_id": user,
            "user_name": user.lower(),
            "command": command,
            "text": text,
            "api_app_id": "A0FAKE",
            "response_url": "https://hooks.slack.com/commands/T0FAKE/1/abc",
            "trigger_id": f"{next(_ids)}.1234.abcdef",
        }
    )


def as_body(payload: dict[str, Any] | str) -> str:
    return payload if isinstance(payload, str) else json.dumps(payload)


def home_opened(user: str, *, tab: str = "home") -> dict[str, Any]:
    """The Events API callback Slack sends when `user` opens the app's Home tab."""
    event = {
        "type": "app_home_opened",
        "user": user,
        "channel": f"D{user}",
        "tab": tab,
        "event_ts": next_ts(),
    }
    return event_envelope(event)


def home_actions(home: dict[str, Any], approval_id: str, action_id: str, *, user: str) -> str:
    """The form-encoded body Slack posts when `user` clicks `action_id` of approval
    `approval_id` in their published App Home `home`: the container is the view, and there is
    no message and no channel."""
    block_id, button = next(
        (b["block_id"], e)
        for b in home.get("blocks", []) if b.get("type") == "actions"
        for e in b["elements"]
        if e.get("action_id") == action_id and e.get("value") == approval_id
    )  # fmt: skip
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0FAKE",
        "token": "legacy-verification-token",
        "container": {"type": "view", "view_id": home["id"]},
        "trigger_id": f"{next(_ids)}.1234.abcdef",
        "team": {"id": TEAM_ID, "domain": "fake-team"},
        "enterprise": None,
        "is_enterprise_install": False,
        "view": {**home, "state": {"values": {}}, "hash": "1700000000.abcdef"},
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "text": button["text"],
                "value": button["value"],
                "style": button.get("style"),
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})
