"""The Slack app manifest and docs/slack.md agree with the code they describe."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.config import Settings
from bot.surfaces.slack.inbound import AUDIT_COMMAND

ROOT = Path(__file__).resolve().parents[2]


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
    }  # fmt: skip
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    needed = {
        "app_mentions:read",
        "assistant:write",  # agents.sessions.setStatus
        "channels:history",
        "groups:history",
        "im:history",
        "chat:write",
        "files:write",
        "commands",
    }
    assert needed <= scopes


def test_manifest_declares_the_app_an_agent():
    """Only apps declared agents may create agent sessions (the setStatus calls)."""
    manifest = yaml.safe_load((ROOT / "slack_app_manifest.yaml").read_text())
    assert manifest["features"]["agent_view"]["agent_description"]


def test_the_surface_listens_for_every_event_the_manifest_subscribes_to():
    """Each subscribed event has a bolt listener (an unheard event would be acked and lost)."""
    manifest = yaml.safe_load((ROOT / "slack_app_manifest.yaml").read_text())
    source = (ROOT / "bot" / "surfaces" / "slack" / "inbound.py").read_text()
    for event in manifest["settings"]["event_subscriptions"]["bot_events"]:
        assert f'bolt.event("{event.split(".")[0]}")' in source, event


def test_slack_page_names_every_slack_setting():
    text = (ROOT / "docs" / "slack.md").read_text()
    for name in Settings.model_fields:
        if name.startswith("slack_"):
            assert name.upper() in text, name
    assert "slack_app_manifest.yaml" in text
    assert "/slack/events" in text
