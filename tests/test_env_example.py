"""`.env.example` lists every setting the bot reads, once, and names nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from bot.config import Settings

REPO = Path(__file__).resolve().parents[1]


def test_env_example_lists_every_setting_once() -> None:
    text = (REPO / ".env.example").read_text()
    named = re.findall(r"^#?([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE)
    assert len(named) == len(set(named)), "a setting is listed twice"
    assert set(named) == {name.upper() for name in Settings.model_fields}
