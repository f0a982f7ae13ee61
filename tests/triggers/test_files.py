"""Trigger files and `chatops triggers validate|list`, through the real command line, and what
the bot does with them at start-up (a bad file stops it; a trigger without its secret is off)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import Settings
from bot.errors import StartupError
from bot.runtime import Runtime
from bot.triggers.templates import TemplateProblem, render
from tests.triggers.payloads import ALERTMANAGER_TRIGGER, PAGERDUTY_TRIGGER

REPO = Path(__file__).resolve().parents[2]


def write(directory: Path, **files: str) -> Path:
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / f"{name}.yaml").write_text(text)
    return directory


def test_validate_names_file_field_line_and_column(tmp_path, capsys):
    typo = ALERTMANAGER_TRIGGER.replace("connectors: [ops]", "conectors: [ops]")
    broken = PAGERDUTY_TRIGGER.replace("request: >-", "request: '{{ alert.title'\nx: >-")
    directory = write(tmp_path / "t", alertmanager=typo, pagerduty=broken)

    assert main(["triggers", "validate", str(directory)]) == 1
    errors = capsys.readouterr().err.splitlines()
    assert f"error: {directory}/alertmanager.yaml (line 8, column 1): field 'conectors': " \
        "unknown field" in errors  # fmt: skip
    template = [e for e in errors if "field 'request'" in e]
    assert template and "(line 7, column 1)" in template[0] and "template error" in template[0]


def test_validate_refuses_bad_values_and_duplicate_names(tmp_path, capsys):
    bad = ALERTMANAGER_TRIGGER.replace("source: alertmanager", "source: grafana").replace(
        "on_resolved: stop", "on_resolved: stop\nrequester: oncall"
    )
    directory = write(tmp_path / "t", a=bad, b=PAGERDUTY_TRIGGER, c=PAGERDUTY_TRIGGER)

    assert main(["triggers", "validate", str(directory)]) == 1
    err = capsys.readouterr().err
    assert "a.yaml (line 2, column 1): field 'source'" in err
    assert "field 'requester': must be `trigger` or `group:<name>`" in err
    assert "trigger 'pagerduty' is also defined in" in err


def test_validate_and_list_the_shipped_examples(monkeypatch, capsys):
    monkeypatch.setenv("PAGERDUTY_WEBHOOK_SECRET", "set")
    assert main(["triggers", "validate", str(REPO / "triggers")]) == 0
    out = capsys.readouterr().out
    assert "ok: " in out and "alertmanager, alertmanager -> slack" in out
    assert "note: ALERTMANAGER_WEBHOOK_TOKEN is not set" in out
    assert "PAGERDUTY_WEBHOOK_SECRET is not set" not in out

    assert main(["triggers", "list", str(REPO / "triggers")]) == 0
    out = capsys.readouterr().out
    assert "POST /hooks/alertmanager" in out and "POST /hooks/pagerduty" in out
    assert "requester: oncall" in out and "connectors: ops" in out


def test_list_reads_chatops_triggers_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CHATOPS_TRIGGERS_DIR", str(write(tmp_path / "t", a=PAGERDUTY_TRIGGER)))
    assert main(["triggers", "list"]) == 0
    assert capsys.readouterr().out.startswith("POST /hooks/pagerduty\n")


def test_a_trigger_without_its_secret_is_off_with_one_log_line(tmp_path, caplog):
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        chatops_triggers_dir=write(tmp_path / "t", a=ALERTMANAGER_TRIGGER),
    )
    caplog.set_level(logging.WARNING, logger="bot.triggers")
    runtime = Runtime.create(settings)
    assert runtime.triggers.armed == {}
    assert runtime.triggers.skipped == {"alertmanager": "AM_WEBHOOK_TOKEN is not set"}
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("trigger 'alertmanager'") and "AM_WEBHOOK_TOKEN is not set" in line
    runtime.engine.dispose()


def test_a_bad_trigger_file_stops_start_up(tmp_path):
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        chatops_triggers_dir=write(tmp_path / "t", a="name: x\nsource: alertmanager\n"),
    )
    with pytest.raises(StartupError, match="bad trigger: .*field 'secret_env': Field required"):
        Runtime.create(settings)


def test_an_explicit_triggers_dir_must_exist(tmp_path):
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        chatops_triggers_dir=tmp_path / "missing",
    )
    with pytest.raises(StartupError, match="CHATOPS_TRIGGERS_DIR=.* is not a directory"):
        Runtime.create(settings)


def test_templates_are_sandboxed_and_forgive_missing_fields():
    alert = {"labels": {"alertname": "Disk"}}
    template = "triage {{ alert.labels.alertname }} on {{ alert.labels.service }}"
    assert render(template, {"alert": alert}) == "triage Disk on"
    with pytest.raises(TemplateProblem):
        render("{{ alert.__class__.__mro__[1].__subclasses__() }}", {"alert": alert})
