"""`build_runtime`: what it wires, in which order, and the readable errors it stops with."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from bot.approvals.schema import policy_of
from bot.runtime import StartupError, build_runtime
from tests.server.conftest import OpsAPI


async def test_build_runtime_wires_tools_hooks_and_agent(make_settings, manifests_dir) -> None:
    settings = make_settings(chatops_manifests_dir=manifests_dir)
    async with aiohttp.ClientSession() as http:
        runtime = await build_runtime(settings, http)
        try:
            names = set(runtime.tools.names())
            assert {"ops__get_service", "ops__restart", "audit__report"} <= names
            assert policy_of(runtime.tools.get("ops__restart")).requires_approval
            assert runtime.hooks.pre_hook_names() == [
                "call_replay",
                "read_only",
                "rate_limit",
                "audit_viewers",
                "approval_gate",
                "credentials",
                "call_log_start",
            ]
            posts = ["redact_result", "truncate_result", "edit_notice", "call_log"]
            assert runtime.hooks.post_hook_names() == posts
            assert runtime.agent.tools is runtime.tools
            assert runtime.agent.hooks is runtime.hooks
            assert runtime.schema_revision
            assert await runtime.check_database()
        finally:
            await runtime.close()


async def test_bad_manifest_stops_start_up_naming_the_file(make_settings, tmp_path: Path) -> None:
    directory = tmp_path / "manifests"
    directory.mkdir()
    (directory / "broken.yaml").write_text("name: broken\nbase_url: not a url\nactions: []\n")
    settings = make_settings(chatops_manifests_dir=directory)
    async with aiohttp.ClientSession() as http:
        with pytest.raises(StartupError, match="broken.yaml"):
            await build_runtime(settings, http)


async def test_configured_manifest_dir_must_exist(make_settings, tmp_path: Path) -> None:
    settings = make_settings(chatops_manifests_dir=tmp_path / "nowhere")
    async with aiohttp.ClientSession() as http:
        with pytest.raises(StartupError, match="CHATOPS_MANIFESTS_DIR=.*nowhere"):
            await build_runtime(settings, http)


async def test_unreachable_database_is_named_without_its_password(
    make_settings, ops_api: OpsAPI
) -> None:
    closed_port = int(ops_api.url.rsplit(":", 1)[1])
    await ops_api.stop()  # nothing listens there any more
    settings = make_settings(
        database_url=f"postgresql+psycopg://bot:hunter2@127.0.0.1:{closed_port}/chatops"
    )
    async with aiohttp.ClientSession() as http:
        with pytest.raises(StartupError) as raised:
            await build_runtime(settings, http)
    message = str(raised.value)
    assert message.startswith("cannot open the database postgresql+psycopg://bot:***@127.0.0.1")
    assert "hunter2" not in message


async def test_connectors_without_their_secrets_are_skipped_and_reported(
    make_settings, manifests_dir: Path
) -> None:
    (manifests_dir / "vault.yaml").write_text(
        "name: vault\nbase_url: https://vault.example\n"
        "auth: {type: bearer, token_env: CHATOPS_TEST_VAULT_TOKEN}\n"
        "actions:\n  - {name: read, description: Read a secret, method: GET, path: /v1/x}\n"
    )
    settings = make_settings(chatops_manifests_dir=manifests_dir)
    async with aiohttp.ClientSession() as http:
        runtime = await build_runtime(settings, http)
        try:
            assert "ops__restart" in runtime.tools
            assert "vault__read" not in runtime.tools
            assert len(runtime.skipped_connectors) == 1
            assert "CHATOPS_TEST_VAULT_TOKEN is not set" in runtime.skipped_connectors[0]
            assert "vault.yaml" in runtime.skipped_connectors[0]
        finally:
            await runtime.close()


async def test_a_connectors_secret_in_dot_env_is_read_like_the_settings_beside_it(
    make_settings, manifests_dir: Path, tmp_path: Path
) -> None:
    """`.env` in the working directory holds the vault token: the connector loads (the model
    settings from the same file always did), and the token is a secret the bot masks."""
    (manifests_dir / "vault.yaml").write_text(
        "name: vault\nbase_url: https://vault.example\n"
        "auth: {type: bearer, token_env: CHATOPS_TEST_VAULT_TOKEN}\n"
        "actions:\n  - {name: read, description: Read a secret, method: GET, path: /v1/x}\n"
    )
    (tmp_path / ".env").write_text("CHATOPS_TEST_VAULT_TOKEN=s3cr3t-from-dotenv\n")
    settings = make_settings(chatops_manifests_dir=manifests_dir)
    async with aiohttp.ClientSession() as http:
        runtime = await build_runtime(settings, http)
        try:
            assert "vault__read" in runtime.tools and runtime.skipped_connectors == []
            assert "s3cr3t-from-dotenv" in runtime.tools.get("vault__read").secret_values()
        finally:
            await runtime.close()
