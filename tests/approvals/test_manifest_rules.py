"""`rules` in manifests: compiled when the manifest loads (`chatops manifests validate` names the
file, action, rule and column of a mistake), and `chatops manifests explain` shows which rule a
call would match and the policy that results, without running anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from tests.approvals.conftest import MANIFEST

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ops.yaml"
    path.write_text(text)
    return path


def explain(path: Path, args: str, *extra: str) -> list[str]:
    return ["manifests", "explain", str(path), "restart", "--args", args, *extra]


BROKEN = """\
name: ops
base_url: https://ops.example.com
actions:
  - name: restart
    description: Restart
    method: POST
    path: /restart
    rules:
      - name: production
        when: args.env == "production" &&
        approval: required
      - when: envv == "staging"
        approval: never
      - name: bad field
        when: "true"
        approval: maybe
rules:
  - name: hours
    when: |
      time.hour < 9 ||
      tme.hour > 17
    approval: deny
"""


def test_validate_names_file_action_rule_and_column(tmp_path, capsys) -> None:
    write(tmp_path, BROKEN)
    assert main(["manifests", "validate", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    where = f"{tmp_path / 'ops.yaml'}: action 'restart' (actions[0])"
    assert (
        f"error: {where}: rule 'production' (rules[0]): field 'when': syntax error at "
        "column 26 near '&&'" in err
    )
    assert any(
        line.startswith(f"error: {where}: rule rules[1]: field 'when': unknown variable 'envv'")
        and "column 1" in line
        for line in err
    )
    assert any("rule 'bad field' (rules[2]): field 'approval'" in line for line in err)
    assert any(
        f"{tmp_path / 'ops.yaml'}: rule 'hours' (rules[0]): field 'when': unknown variable "
        "'tme' at line 2, column 1" in line
        for line in err
    )
    assert "Traceback" not in "\n".join(err)


def test_the_example_manifests_and_the_rules_manifest_validate(tmp_path, capsys) -> None:
    assert main(["manifests", "validate", str(REPO / "manifests")]) == 0
    write(tmp_path, MANIFEST.format(url="https://ops.example.com", lead="U0LEAD"))
    assert main(["manifests", "validate", str(tmp_path)]) == 0


@pytest.fixture
def rules_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHATOPS_APPROVER_GROUPS", '{"leads": ["U0LEAD", "U0LEAD2"]}')
    return write(tmp_path, MANIFEST.format(url="https://ops.example.com", lead="U0LEAD"))


def test_explain_shows_the_matching_rule_and_the_policy(rules_file: Path, capsys) -> None:
    assert main(explain(rules_file, '{"name": "api", "env": "production"}', "--user", "U0DEV")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == 'rule: two leads on production (when: args.env == "production")'
    assert "approval: required" in out
    assert "approvers: leads (U0LEAD, U0LEAD2)" in out
    assert "min_approvals: 2" in out and "allow_self_approval: false" in out
    assert "risk: high" in out and "reason: production needs two leads" in out

    assert main(explain(rules_file, '{"name": "api", "env": "staging"}')) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("rule: staging is free")
    assert out[1] == "approval: never (runs without asking)"

    assert main(explain(rules_file, '{"name": "api", "env": "qa"}')) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("rule: qa waits briefly") and "timeout_s: 0.5, then reject" in out

    assert main(explain(rules_file, '{"name": "api", "env": "dev"}')) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "rule: none matched (4 rule(s)): the static policy"
    assert "approvers: U0LEAD" in out and "min_approvals: 1" in out

    assert main(explain(rules_file, '{"name": "payments-db-2", "env": "staging"}')) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("rule: connector.never payments-db")
    assert out[1:] == [
        "approval: deny (blocked, nobody is asked)",
        "reason: payments-db changes go through the change board",
    ]


def test_explain_reads_the_time_in_the_configured_zone(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CHATOPS_TIMEZONE", "Asia/Seoul")
    path = write(
        tmp_path,
        MANIFEST.format(url="https://ops.example.com", lead="U0LEAD").replace(
            "rules:\n  - name: never payments-db",
            'rules:\n  - name: night\n    when: time.hour < 7 && time.weekday == "Sat"\n'
            "    approval: deny\n    reason: nobody is awake\n  - name: never payments-db",
        ),
    )
    # Friday 20:00 UTC is Saturday 05:00 in Seoul
    assert main(explain(path, '{"name": "a", "env": "dev"}', "--at", "2026-12-04T20:00:00Z")) == 0
    assert capsys.readouterr().out.startswith("rule: connector.night")
    assert main(explain(path, '{"name": "a", "env": "dev"}', "--at", "2026-12-04T10:00:00Z")) == 0
    assert capsys.readouterr().out.startswith("rule: none matched")


def test_explain_errors_are_one_line(rules_file: Path, capsys) -> None:
    main(explain(rules_file, "[1]"))
    err = capsys.readouterr().err
    assert "--args must be a JSON object" in err and "Traceback" not in err
    main(["manifests", "explain", str(rules_file), "nope"])
    err = capsys.readouterr().err
    assert "no action 'nope' (actions: restart)" in err


def test_a_rule_that_cannot_be_evaluated_denies(rules_file: Path, capsys) -> None:
    """A missing argument must not skip a rule (it could be the one asking for more people)."""
    assert main(explain(rules_file, '{"env": "production"}')) == 0
    out = capsys.readouterr().out
    assert "could not be evaluated" in out and "approval: deny" in out
    assert "has(args.name)" in out


BAD_ROUTING = """\
name: ops
base_url: https://ops.example.com
actions:
  - name: restart
    description: Restart
    method: POST
    path: /restart
    route: "channel:"
    rules:
      - name: climbs down
        when: "true"
        escalate:
          - {after_s: 600, approvers: [U1]}
          - {after_s: 300, approvers: [U2]}
      - name: nobody
        when: "true"
        route: pager
        escalate: [{after_s: 60, approvers: []}]
"""


def test_route_and_escalate_are_validated_where_they_are_written(tmp_path, capsys) -> None:
    write(tmp_path, BAD_ROUTING)
    assert main(["manifests", "validate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    where = f"{tmp_path / 'ops.yaml'}: action 'restart' (actions[0])"
    assert f"{where}: field 'route'" in err
    assert f"{where}: rule 'climbs down' (rules[0]): field 'escalate'" in err
    assert "increasing after_s" in err
    assert f"{where}: rule 'nobody' (rules[1]): field 'route'" in err
    assert "rule 'nobody' (rules[1]): field 'escalate.0.approvers'" in err


def test_explain_shows_the_route_and_the_ladder(tmp_path, monkeypatch, capsys) -> None:
    from tests.approvals.conftest import ROUTED_MANIFEST

    monkeypatch.setenv("CHATOPS_APPROVER_GROUPS", '{"leads": ["U0LEAD", "U0LEAD2"]}')
    text = ROUTED_MANIFEST.format(
        url="https://ops.example.com", lead="U0LEAD", boss="U0BOSS", channel="C0APPROVALS"
    )
    path = write(tmp_path, text)
    assert main(explain(path, '{"name": "api", "env": "production"}')) == 0
    assert "route: channel:C0APPROVALS" in capsys.readouterr().out.splitlines()
    assert main(explain(path, '{"name": "api", "env": "qa"}')) == 0
    out = capsys.readouterr().out.splitlines()
    assert "route: thread" in out and "approvers: U0LEAD" in out
    assert "escalate: after 600 s add U0BOSS (paging the SRE manager)" in out
