"""The Slack app manifest and docs/slack.md agree with the code they describe."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from bot.surfaces.slack.listeners import AUDIT_COMMAND
from tests.python_source import parse_file

ROOT = Path(__file__).resolve().parents[2]
SLACK_CODE = ROOT / "bot" / "surfaces" / "slack"

# The bot scopes each Web API method needs (api.slack.com/methods/<method>, "Required scopes").
# A new call the surface makes fails the test below until its scopes are written here.
METHOD_SCOPES: dict[str, set[str]] = {
    "auth_test": set(),
    "apps_connections_open": set(),  # the app-level token's connections:write, no bot scope
    "bots_info": {"users:read"},
    "chat_postMessage": {"chat:write", "chat:write.public"},  # scheduled audits: any channel
    "chat_postEphemeral": {"chat:write"},
    "chat_update": {"chat:write"},
    "chat_delete": {"chat:write"},
    "chat_getPermalink": set(),
    "chat_startStream": {"chat:write"},
    "chat_appendStream": {"chat:write"},
    "chat_stopStream": {"chat:write"},
    "conversations_open": {"im:write"},  # `route: dm`: an approval card in the approver's DM
    "files_upload_v2": {"files:write"},
    "views_open": set(),
    "views_publish": set(),  # the App Home ("Waiting for you")
    "agents_sessions_setStatus": {"assistant:write"},
}
# The bot events each bolt listener needs, and the scope each event needs.
LISTENER_EVENTS = {
    "app_mention": {"app_mention"},
    "message": {"message.channels", "message.groups", "message.im"},  # replies in threads, DMs
    "agent_session_stopped": {"agent_session_stopped"},
    "app_home_opened": {"app_home_opened"},  # the approver's inbox, published on opening
    "app_uninstalled": {"app_uninstalled"},  # OAuth installs: the workspace's tokens deleted
    "tokens_revoked": {"tokens_revoked"},
}
EVENT_SCOPES = {
    "app_mention": {"app_mentions:read"},
    "message.channels": {"channels:history"},
    "message.groups": {"groups:history"},
    "message.im": {"im:history"},
    "agent_session_stopped": set(),
    "app_home_opened": set(),
    "app_uninstalled": set(),
    "tokens_revoked": set(),
}


def slack_calls() -> set[str]:
    """Every Web API method the Slack surface calls (`<anything>.client.<method>(...)`)."""
    called: set[str] = set()
    for path in SLACK_CODE.glob("*.py"):
        for node in ast.walk(parse_file(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                if name in ("client", "_client") and hasattr(AsyncWebClient, node.func.attr):
                    called.add(node.func.attr)
    return called


def bolt_listeners(kind: str) -> set[str]:
    """The first argument of every `bolt.<kind>(...)` registration (strings as written)."""
    found: set[str] = set()
    for node in ast.walk(parse_file(SLACK_CODE / "listeners.py")):
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == kind and getattr(node.func.value, "id", "") == "bolt"
            and node.args
        ):  # fmt: skip
            arg = node.args[0]
            found.add(arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg))
    return found


def test_the_manifest_grants_exactly_the_scopes_the_code_uses() -> None:
    """Scopes derived from the calls the surface makes and the events it listens to, compared
    with the manifest both ways: a missing scope fails a real install (`missing_scope`, as
    `im:write` did for `route: dm`), an unused one asks the workspace for too much."""
    manifest = yaml.safe_load((ROOT / "slack_app_manifest.yaml").read_text())
    calls = slack_calls()
    assert {"chat_postMessage", "conversations_open", "files_upload_v2"} <= calls  # the scan works
    unknown = calls - METHOD_SCOPES.keys()
    assert not unknown, f"write the scopes of {sorted(unknown)} into METHOD_SCOPES"
    events = set().union(*(LISTENER_EVENTS[e] for e in bolt_listeners("event")))
    needed = set().union(*(METHOD_SCOPES[m] for m in calls), *(EVENT_SCOPES[e] for e in events))
    if bolt_listeners("command"):
        needed.add("commands")
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == needed
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == events
    interactive = bolt_listeners("action") | bolt_listeners("view")
    assert manifest["settings"]["interactivity"]["is_enabled"] is bool(interactive)
    # the inbox is the Home tab: published on `app_home_opened`, so the tab must be on
    home_tab = manifest["features"]["app_home"]["home_tab_enabled"]
    assert home_tab is ("views_publish" in calls) is ("app_home_opened" in bolt_listeners("event"))


def test_manifest_points_everything_at_the_one_route():
    manifest = yaml.safe_load((ROOT / "slack_app_manifest.yaml").read_text())
    settings = manifest["settings"]
    assert settings["event_subscriptions"]["request_url"].endswith("/slack/events")
    assert settings["interactivity"] == {
        "is_enabled": True,
        "request_url": "https://YOUR-HOST/slack/events",
    }
    [command] = manifest["features"]["slash_commands"]
    assert command["command"] == AUDIT_COMMAND
    assert command["url"].endswith("/slack/events")


def test_manifest_subscribes_to_what_the_surface_handles():
    manifest = yaml.safe_load((ROOT / "slack_app_manifest.yaml").read_text())
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert events == {
        "app_mention", "message.channels", "message.groups", "message.im",
        "agent_session_stopped",  # Slack's own stop button on a run's agent session
        "app_home_opened",  # the approver's inbox in the Home tab
        "app_uninstalled", "tokens_revoked",  # OAuth installs: tokens deleted, runs stopped
    }  # fmt: skip


def test_manifest_declares_the_app_an_agent():
    """Only apps declared agents may create agent sessions (the setStatus calls)."""
    manifest = yaml.safe_load((ROOT / "slack_app_manifest.yaml").read_text())
    assert manifest["features"]["agent_view"]["agent_description"]


def test_the_surface_listens_for_every_event_the_manifest_subscribes_to():
    """Each subscribed event has a bolt listener (an unheard event would be acked and lost)."""
    manifest = yaml.safe_load((ROOT / "slack_app_manifest.yaml").read_text())
    source = (ROOT / "bot" / "surfaces" / "slack" / "listeners.py").read_text()
    for event in manifest["settings"]["event_subscriptions"]["bot_events"]:
        assert f'bolt.event("{event.split(".")[0]}")' in source, event


def test_slack_page_names_every_slack_setting():
    text = (ROOT / "docs" / "slack.md").read_text()
    for name in Settings.model_fields:
        if name.startswith("slack_"):
            assert name.upper() in text, name
    assert "slack_app_manifest.yaml" in text
    assert "/slack/events" in text
    manifest = yaml.safe_load((ROOT / "slack_app_manifest.yaml").read_text())
    for scope in manifest["oauth_config"]["scopes"]["bot"]:  # the page says why each is asked
        assert f"`{scope}`" in text, scope
