"""`chatops audit --platform P --workspace W`: one workspace's report from the command line
(one deployment serving several Slack teams or Feishu tenants), on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from bot.cli import main
from bot.storage.models import CallLog
from tests.audit.conftest import at
from tests.audit.test_cli import WINDOW


@pytest.fixture
def env(audit_engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeded week plus one call in each of two Slack workspaces."""
    with Session(audit_engine) as session:
        for team, name in (("T0AAA", "only-in-a"), ("T0BBB", "only-in-b")):
            session.add(
                CallLog(
                    at=at(40),
                    platform="slack",
                    workspace=team,
                    channel="C0OPS",
                    requester="U0DEV",
                    connector="ops",
                    action="restart",
                    tool_name="ops__restart",
                    mutating=True,
                    arguments={"name": name},
                    result_status="ok",
                )  # fmt: skip
            )
        session.commit()
    monkeypatch.setenv("DATABASE_URL", database_url)


@pytest.mark.both_databases
def test_the_workspace_filter_lists_that_workspaces_calls_alone(
    env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", *WINDOW, "--format", "csv"]) == 0
    everything = capsys.readouterr().out
    assert "only-in-a" in everything and "only-in-b" in everything
    assert (
        main(["audit", *WINDOW, "--platform", "slack", "--workspace", "T0BBB", "--format", "csv"])
        == 0
    )
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["workspace"], r["arguments"]) for r in rows] == [("T0BBB", '{"name": "only-in-b"}')]
    assert main(["audit", *WINDOW, "--workspace", "T0AAA"]) == 0
    report = capsys.readouterr().out
    assert "only-in-a" in report and "only-in-b" not in report
    assert "workspace any:T0AAA only" in report
