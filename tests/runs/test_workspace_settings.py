"""CHATOPS_WORKSPACES_FILE (issue 35, item 3): the connectors a workspace's runs may use, and
the file's checks (`chatops workspaces validate`, `chatops serve`: file, line, field, exit 2).

The run test drives the real app through Feishu's webhook: one app, two tenants; the model's
first request shows which tools each run was offered."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.errors import ConfigError
from bot.server import RUNTIME_KEY, create_app
from bot.surfaces.feishu.mount import FEISHU_APPS_KEY
from bot.workspaces import load_workspaces
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.feishu.e2e import bot_settings, manifest
from tests.server.test_serve import free_port

NOTES = """\
name: notes
description: Team notes
base_url: {url}
auth: {{type: none}}
actions:
  - name: read
    description: Read one note
    method: GET
    path: /services/{{name}}
    parameters: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
"""
WORKSPACES = """\
default:
  connectors: [notes]
workspaces:
  - platform: feishu
    workspace: tenant_ops
    connectors: [ops]
    max_active_runs_per_user: 3
"""


def _manifests(tmp_path: Path, url: str) -> Path:
    directory = tmp_path / "manifests"
    directory.mkdir(exist_ok=True)
    (directory / "ops.yaml").write_text(manifest(url))
    (directory / "notes.yaml").write_text(NOTES.format(url=url))
    return directory


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "workspaces.yaml"
    path.write_text(text)
    return path


@pytest.mark.both_databases
async def test_a_run_sees_only_its_workspaces_connectors(
    aiohttp_client,
    tmp_path,
    database_url,
    ops_api,
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
):
    settings = bot_settings(
        database_url=database_url, manifests=_manifests(tmp_path, ops_api.url),
        fake=fake_feishu, llm_url=fake_openai.base_url,
        chatops_workspaces_file=_file(tmp_path, WORKSPACES),
    )  # fmt: skip
    client = await aiohttp_client(create_app(settings))
    fake_openai.respond_with(lambda request: answer("done"))
    url = str(client.make_url("/feishu/events"))
    offered: dict[str, set[str]] = {}
    for tenant in ("tenant_ops", "tenant_other"):
        fake_feishu.tenant_key = tenant  # the app serves both tenants (FEISHU_* answers any)
        before = len(fake_openai.requests)
        status, _ = await fake_feishu.push(url, fake_feishu.message_event("what can you do?"))
        assert status == 200
        await client.app[FEISHU_APPS_KEY].wait_idle(10)
        await client.app[RUNTIME_KEY].run_manager.wait_idle(15)
        first = fake_openai.requests[before]
        offered[tenant] = {tool["function"]["name"].split("__")[0] for tool in first["tools"]}
    assert offered["tenant_ops"] == {"ops"}
    assert offered["tenant_other"] == {"notes"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            WORKSPACES.replace("connectors: [ops]", "tools: [ops]"),
            r":6: workspaces.0.tools: unknown field",
        ),
        (WORKSPACES.replace("[ops]", "[opz]"), r":6: unknown connector 'opz'"),
        (
            WORKSPACES.replace("user: 3", "user: 0"),
            r":7: workspaces.0.max_active_runs_per_user: Input should be greater than",
        ),
        (WORKSPACES.replace("platform: feishu", "platform: teams"), r":4: workspaces.0.platform: "),
        (
            WORKSPACES + WORKSPACES.split("workspaces:\n")[1],
            r":8: feishu tenant_ops is listed twice",
        ),
    ],
)
def test_a_bad_file_names_its_line_and_field(tmp_path, ops_api, text, expected):
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError, match=expected):
        load_workspaces(path, _manifests(tmp_path, ops_api.url))


def test_validate_and_serve_say_what_is_wrong_with_exit_2(tmp_path, monkeypatch, capsys):
    manifests = _manifests(tmp_path, "http://127.0.0.1:9")
    good = _file(tmp_path, WORKSPACES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHATOPS_MANIFESTS_DIR", str(manifests))
    assert main(["workspaces", "validate", str(good)]) == 0
    assert "1 workspace(s) and a default" in capsys.readouterr().out

    bad = _file(tmp_path, WORKSPACES.replace("[ops]", "[opz]"))
    assert main(["workspaces", "validate", str(bad)]) == 2
    assert f"chatops: error: {bad}:6: unknown connector 'opz'" in capsys.readouterr().err

    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    monkeypatch.setenv("CHATOPS_WORKSPACES_FILE", str(bad))
    assert main(["serve", "--host", "127.0.0.1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:6: unknown connector 'opz'" in err and "Traceback" not in err
