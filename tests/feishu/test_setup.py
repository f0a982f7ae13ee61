"""setup_feishu refuses configurations that would accept unverified events."""

from __future__ import annotations

import pytest

from bot.config import Settings
from bot.errors import StartupError
from bot.server import create_app


def _settings(tmp_path, **values) -> Settings:
    return Settings(
        _env_file=None,
        database_url=f"sqlite:///{tmp_path / 'chatops.db'}",
        openai_base_url="http://127.0.0.1:9/v1",
        feishu_app_id="cli_x",
        feishu_app_secret="s",
        feishu_domain="http://127.0.0.1:9",
        **values,
    )


def test_webhook_mode_without_token_or_key_does_not_start(tmp_path):
    with pytest.raises(StartupError, match="webhook mode needs FEISHU_VERIFICATION_TOKEN"):
        create_app(_settings(tmp_path))


def test_webhook_mode_with_only_an_encrypt_key_does_not_start(tmp_path):
    """Feishu sends the Verification Token in every push and lark-oapi refuses a push whose
    token it has nothing to compare with: a key alone would start a bot deaf to every event."""
    with pytest.raises(StartupError, match="webhook mode needs FEISHU_VERIFICATION_TOKEN"):
        create_app(_settings(tmp_path, feishu_encrypt_key="k"))


def test_unknown_mode_does_not_start(tmp_path):
    with pytest.raises(StartupError, match="FEISHU_MODE"):
        create_app(_settings(tmp_path, feishu_mode="carrier-pigeon", feishu_encrypt_key="k"))


def test_webhook_mode_without_an_encrypt_key_does_not_start(tmp_path):
    """Without the key nothing is signed: a card click would be trusted on the verification
    token alone, which every push carries."""
    with pytest.raises(StartupError) as info:
        create_app(_settings(tmp_path, feishu_verification_token="t"))
    assert "FEISHU_ENCRYPT_KEY" in str(info.value) and "FEISHU_MODE=longconn" in str(info.value)


def test_long_connection_mode_needs_no_encrypt_key(tmp_path):
    create_app(_settings(tmp_path, feishu_mode="longconn"))


def test_webhook_route_is_mounted_with_a_token_and_a_key(tmp_path):
    app = create_app(_settings(tmp_path, feishu_verification_token="t", feishu_encrypt_key="k"))
    routes = {(r.method, r.resource.canonical) for r in app.router.routes()}
    assert ("POST", "/feishu/events") in routes


def test_domain_that_is_not_an_https_origin_does_not_start(tmp_path):
    settings = _settings(tmp_path, feishu_verification_token="t", feishu_encrypt_key="k")
    settings.feishu_domain = "http://open.feishu.cn"
    with pytest.raises(StartupError, match="FEISHU_DOMAIN"):
        create_app(settings)
