"""The quick-start's environment table and route list match the code (docs must not drift)."""

from __future__ import annotations

import re
from pathlib import Path

from bot.config import Settings
from bot.server import create_app

DOC = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"### {title}")
    end = text.find("\n### ", start + 1)
    return text[start : end if end != -1 else None]


def test_environment_table_lists_every_setting_once() -> None:
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \|", _section("Environment"), flags=re.MULTILINE)
    assert sorted(rows) == sorted(name.upper() for name in Settings.model_fields)


def test_route_table_lists_every_route(make_settings) -> None:
    documented = set(re.findall(r"^\| `(GET|POST) ([^`]+)` \|", _section("HTTP routes"), re.M))
    app = create_app(
        make_settings(
            slack_bot_token="xoxb-1",
            slack_signing_secret="s",
            feishu_app_id="cli_1",
            feishu_app_secret="s",
            feishu_verification_token="v",
            feishu_encrypt_key="k",
        )
    )
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.method in ("GET", "POST") and route.resource is not None
    }
    assert served == documented
