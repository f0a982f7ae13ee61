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
    assert events == {"app_mention", "message.channels", "message.groups", "message.im"}
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    needed = {
        "app_mentions:read",
        "channels:history",
        "groups:history",
        "im:history",
        "chat:write",
        "files:write",
        "commands",
    }
    assert needed <= scopes


def test_slack_page_names_every_slack_setting():
    text = (ROOT / "docs" / "slack.md").read_text()
    for name in Settings.model_fields:
        if name.startswith("slack_"):
            assert name.upper() in text, name
    assert "slack_app_manifest.yaml" in text
    assert "/slack/events" in text
