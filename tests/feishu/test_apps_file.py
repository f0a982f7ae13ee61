"""CHATOPS_FEISHU_APPS_FILE is checked at start-up: each mistake stops `chatops serve` with one
line naming the file, the line and the field, never a traceback or a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.config import Settings
from bot.errors import StartupError
from bot.surfaces.feishu.apps import app_for_tenant, load_feishu_apps
from tests.server.test_serve import free_port

GOOD = """\
apps:
  - name: sales
    app_id: cli_sales
    app_secret_env: SALES_SECRET
    verification_token_env: SALES_TOKEN
    encrypt_key_env: SALES_KEY
    tenant_keys: [tenant_sales]
"""
ENV = {"SALES_SECRET": "sales-app-secret-1", "SALES_TOKEN": "sales-tok", "SALES_KEY": "sales-k"}


def _settings(tmp_path: Path, text: str, **values) -> Settings:
    path = tmp_path / "apps.yaml"
    path.write_text(text)
    return Settings(_env_file=None, chatops_feishu_apps_file=path, **values)


def test_a_good_file_gives_each_app_its_route_and_tenants(tmp_path):
    settings = _settings(
        tmp_path, GOOD, feishu_app_id="cli_default", feishu_app_secret="default-secret"
    )
    default, sales = load_feishu_apps(settings, ENV)
    assert (default.route, sales.route) == ("/feishu/events", "/feishu/events/sales")
    assert sales.app_secret == "sales-app-secret-1" and sales.encrypt_key == "sales-k"
    assert "sales-app-secret-1" not in repr(sales)
    assert app_for_tenant((default, sales), "tenant_sales") is sales
    assert app_for_tenant((default, sales), "tenant_other") is default
    assert app_for_tenant((sales,), "tenant_other") is None


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        (
            GOOD.replace("tenant_keys", "tenants"),
            ENV,
            r"apps.yaml:7: apps.0.tenants: unknown field",
        ),
        (GOOD.replace("name: sales", "name: Sales Team"), ENV, r"apps.yaml:2: apps.0.name: "),
        (
            GOOD,
            {**ENV, "SALES_KEY": ""},
            r"apps.yaml:6: app 'sales': encrypt_key_env names SALES_KEY, which is not set",
        ),
        (GOOD + GOOD.removeprefix("apps:\n"), ENV, "two apps are named 'sales'"),
        (
            GOOD + GOOD.removeprefix("apps:\n").replace("name: sales", "name: other"),
            ENV,
            "app id cli_sales is listed twice",
        ),
        (
            GOOD
            + GOOD.removeprefix("apps:\n")
            .replace("name: sales", "name: other")
            .replace("cli_sales", "cli_other"),
            ENV,
            "tenant tenant_sales is claimed by apps 'sales' and 'other'",
        ),
        ("apps: [", ENV, r"apps.yaml:\d+: not valid YAML"),
        ("apps: []", ENV, "apps.yaml:1: apps: List should have at least 1 item"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_line_and_field(tmp_path, text, env, expected):
    with pytest.raises(StartupError, match=expected) as caught:
        load_feishu_apps(_settings(tmp_path, text), env)
    assert "sales-app-secret-1" not in str(caught.value)


def test_a_long_connection_beside_an_apps_file_is_refused(tmp_path):
    """lark-oapi's websocket client runs on one module-level loop: one per process."""
    settings = _settings(
        tmp_path, GOOD, feishu_app_id="cli_d", feishu_app_secret="d", feishu_mode="longconn"
    )
    with pytest.raises(StartupError, match="one process holds one long connection"):
        load_feishu_apps(settings, ENV)


def test_serve_with_a_bad_apps_file_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "apps.yaml"
    path.write_text(GOOD.replace("tenant_keys", "tenant"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    monkeypatch.setenv("CHATOPS_FEISHU_APPS_FILE", str(path))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--host", "127.0.0.1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert f"{path}:7: apps.0.tenant: unknown field" in err
    assert "Traceback" not in err and "sales-app-secret-1" not in err
