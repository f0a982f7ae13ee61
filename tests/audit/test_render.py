# ruff: noqa: E501 - the expected outputs are literal report lines
"""Every format of the seeded report, with exact figures: Markdown, CSV, JSON, Slack Block Kit
and the Feishu card; and the chat formats' size limits on a report far too big for them."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import Engine

from bot.audit.render import csv_text, json_text, markdown
from bot.audit.report import AuditQuery, AuditReport, CallEntry, build_report, iter_calls
from bot.surfaces.feishu.audit_report import FEISHU_MAX_BYTES, feishu_card
from bot.surfaces.feishu.limits import request_bytes
from bot.surfaces.slack.audit_report import SLACK_MAX_BLOCKS, SLACK_SECTION_CHARS, slack_blocks
from bot.surfaces.slack.limits import blocks_text_length
from tests.audit.conftest import NOW, SECRET

EXPECTED_MARKDOWN = (
    "# Audit report: 2026-11-13 12:00 to 2026-11-20 12:00 UTC\n"
    "\n"
    "Generated 2026-11-20 12:00 UTC.\n"
    "\n"
    "## Totals\n"
    "\n"
    "| calls | ok | errors | blocked | rejected | expired | mutating | requesters |\n"
    "|---|---|---|---|---|---|---|---|\n"
    "| 11 | 5 | 3 | 1 | 1 | 1 | 7 | 3 |\n"
    "\n"
    "## Runs\n"
    "\n"
    "| runs | done | failed | cancelled |\n"
    "|---|---|---|---|\n"
    "| 3 | 1 | 2 | 0 |\n"
    "\n"
    "### Why runs failed\n"
    "\n"
    "| count | error | last seen |\n"
    "|---|---|---|\n"
    "| 2 | LLMError: the model endpoint 127.0.0.1 refused the key (401), sent Bearer [REDACTED] | 2026-11-20 09:00 |\n"
    "\n"
    "## By connector and action\n"
    "\n"
    "| connector | action | calls | ok | errors | blocked | rejected | expired | p50 ms | p95 ms |\n"
    "|---|---|---|---|---|---|---|---|---|---|\n"
    "| k8s | restart | 5 | 1 | 2 | 1 | 0 | 1 | 600 | 1000 |\n"
    "| pagerduty | list_incidents | 3 | 2 | 1 | 0 | 0 | 0 | 100 | 300 |\n"
    "| pagerduty | acknowledge | 2 | 1 | 0 | 0 | 1 | 0 | 200 | 200 |\n"
    "| k8s | get_pods | 1 | 1 | 0 | 0 | 0 | 0 | 20 | 20 |\n"
    "\n"
    "## Approvals\n"
    "\n"
    "| requested | approved | rejected | expired | cancelled | pending | median time to decision | self-approvals |\n"
    "|---|---|---|---|---|---|---|---|\n"
    "| 6 | 4 | 1 | 1 | 0 | 0 | 120 s | 1 |\n"
    "\n"
    "### Decisions per approver\n"
    "\n"
    "| approver | approved | rejected | self-approvals |\n"
    "|---|---|---|---|\n"
    "| U_LEAD | 2 | 1 | 0 |\n"
    "| U_CAROL | 1 | 0 | 1 |\n"
    "| U_DAVE | 1 | 0 | 0 |\n"
    "\n"
    "### Approvals by rule\n"
    "\n"
    "| connector | action | rule | calls | no approval | approved | rejected | expired | denied |\n"
    "|---|---|---|---|---|---|---|---|---|\n"
    "| k8s | get_pods | (static policy) | 1 | 1 | 0 | 0 | 0 | 0 |\n"
    "| k8s | restart | (static policy) | 2 | 0 | 2 | 0 | 0 | 0 |\n"
    "| k8s | restart | production | 3 | 1 | 1 | 0 | 1 | 0 |\n"
    "| pagerduty | acknowledge | (static policy) | 2 | 0 | 1 | 1 | 0 | 0 |\n"
    "| pagerduty | list_incidents | (static policy) | 3 | 3 | 0 | 0 | 0 | 0 |\n"
    "\n"
    "### Feedback on answers\n"
    "\n"
    "| answers rated | thumbs up | thumbs down |\n"
    "|---|---|---|\n"
    "| 1 | 2 | 1 |\n"
    "\n"
    "## By requester\n"
    "\n"
    "| requester | calls | ok | errors | blocked | rejected | expired | mutating |\n"
    "|---|---|---|---|---|---|---|---|\n"
    "| U_ALICE | 6 | 3 | 2 | 1 | 0 | 0 | 4 |\n"
    "| U_BOB | 3 | 1 | 0 | 0 | 1 | 1 | 2 |\n"
    "| U_CAROL | 2 | 1 | 1 | 0 | 0 | 0 | 1 |\n"
    "\n"
    "## Mutating calls (7)\n"
    "\n"
    "| when (UTC) | requester | connector | action | arguments | approval | decided | outcome |\n"
    "|---|---|---|---|---|---|---|---|\n"
    '| 2026-11-18 12:06 | U_ALICE | pagerduty | acknowledge | `{"api_token":"[REDACTED]","id":"P1"}` | approved | approved by U_LEAD | ok |\n'
    '| 2026-11-18 20:06 | U_BOB | pagerduty | acknowledge | `{"id":"P2"}` | rejected | rejected by U_LEAD | rejected: rejected by U_LEAD: not yours |\n'
    '| 2026-11-19 07:00 | U_BOB | k8s | restart | `{"deployment":"api"}` | expired | - | expired: approval timed out |\n'
    '| 2026-11-19 16:06 | U_CAROL | k8s | restart | `{"deployment":"web"}` | approved | approved by U_CAROL | error: deployment not found |\n'
    '| 2026-11-19 21:00 | U_ALICE | k8s | restart | `{"deployment":"api"}` | not_required | - | blocked: rate limit: 5 calls per minute |\n'
    '| 2026-11-20 02:06 | U_ALICE | k8s | restart | `{"deployment":"api"}` | approved | approved by U_DAVE | ok |\n'
    '| 2026-11-20 07:12 | U_ALICE | k8s | restart | `{"deployment":"worker"}` | approved | approved by U_LEAD | error: deployment not found |\n'
    "\n"
    "## Most frequent errors\n"
    "\n"
    "| count | connector | action | error | last seen |\n"
    "|---|---|---|---|---|\n"
    "| 2 | k8s | restart | deployment not found | 2026-11-20 07:12 |\n"
    "| 1 | pagerduty | list_incidents | HTTP 503 from pagerduty | 2026-11-18 13:00 |\n"
)

EXPECTED_CSV = (
    "id,at,platform,channel,requester,connector,action,arguments,approval_status,approved_by,rejected_by,result_status,duration_ms,error,policy_rule,answer_thumbs_up,answer_thumbs_down,approval_comment,workspace\n"
    '1,2026-11-18T10:00:00+00:00,slack,C_OPS,U_ALICE,pagerduty,list_incidents,"{""status"": ""triggered""}",not_required,,,ok,100,,,2,1,,\n'
    '2,2026-11-18T11:00:00+00:00,slack,C_OPS,U_BOB,pagerduty,list_incidents,"{""status"": ""triggered""}",not_required,,,ok,300,,,2,1,,\n'
    '4,2026-11-18T12:06:00+00:00,slack,C_OPS,U_ALICE,pagerduty,acknowledge,"{""api_token"": ""[REDACTED]"", ""id"": ""P1""}",approved,U_LEAD,,ok,200,,,2,1,,\n'
    '3,2026-11-18T13:00:00+00:00,slack,C_OPS,U_ALICE,pagerduty,list_incidents,"{""status"": ""resolved""}",not_required,,,error,50,HTTP 503 from pagerduty,,2,1,,\n'
    '5,2026-11-18T20:06:00+00:00,slack,C_OPS,U_BOB,pagerduty,acknowledge,"{""id"": ""P2""}",rejected,,U_LEAD,rejected,0,rejected by U_LEAD: not yours,,2,1,,\n'
    '6,2026-11-19T07:00:00+00:00,slack,C_OPS,U_BOB,k8s,restart,"{""deployment"": ""api""}",expired,,,expired,0,approval timed out,production,2,1,,\n'
    '7,2026-11-19T16:06:00+00:00,slack,C_OPS,U_CAROL,k8s,restart,"{""deployment"": ""web""}",approved,U_CAROL,,error,400,deployment not found,,2,1,,\n'
    '8,2026-11-19T21:00:00+00:00,slack,C_OPS,U_ALICE,k8s,restart,"{""deployment"": ""api""}",not_required,,,blocked,0,rate limit: 5 calls per minute,production,2,1,,\n'
    '9,2026-11-20T00:00:00+00:00,slack,C_OPS,U_CAROL,k8s,get_pods,"{""namespace"": ""prod""}",not_required,,,ok,20,,,2,1,,\n'
    '10,2026-11-20T02:06:00+00:00,slack,C_OPS,U_ALICE,k8s,restart,"{""deployment"": ""api""}",approved,U_DAVE,,ok,1000,,production,2,1,,\n'
    '11,2026-11-20T07:12:00+00:00,slack,C_OPS,U_ALICE,k8s,restart,"{""deployment"": ""worker""}",approved,U_LEAD,,error,600,deployment not found,,2,1,,\n'
)


def seeded(engine: Engine) -> AuditReport:
    return build_report(engine, AuditQuery.window("7d", now=NOW), now=NOW)


def test_markdown_tables(audit_engine: Engine) -> None:
    assert markdown(seeded(audit_engine)) == EXPECTED_MARKDOWN


def test_csv_one_row_per_call(audit_engine: Engine) -> None:
    text = csv_text(iter_calls(audit_engine, AuditQuery.window("7d", now=NOW)))
    assert text == EXPECTED_CSV
    assert SECRET not in text


def test_json_is_the_report_model(audit_engine: Engine) -> None:
    report = seeded(audit_engine)
    data = json.loads(json_text(report))
    assert data["totals"] == {
        "calls": 11,
        "ok": 5,
        "errors": 3,
        "blocked": 1,
        "rejected": 1,
        "expired": 1,
        "unknown": 0,
        "mutating": 7,
        "requesters": 3,
    }
    assert data["approvals"]["median_decision_s"] == 120.0
    assert data["query"]["since"] == "2026-11-13T12:00:00Z"
    assert data["mutating_calls"][0]["arguments"] == {"id": "P1", "api_token": "[REDACTED]"}
    assert AuditReport.model_validate_json(json_text(report)) == report


def test_slack_blocks(audit_engine: Engine) -> None:
    blocks = slack_blocks(seeded(audit_engine))
    assert [b["type"] for b in blocks] == [
        "header",
        "context",
        "section",
        "section",
        "section",
        "divider",
        "section",
        "section",
        "section",
        "section",
        "section",
        "section",
        "divider",
        "section",
        "section",
    ]
    fields = [f["text"] for f in blocks[2]["fields"]]
    assert fields == [
        "*calls*\n11",
        "*ok*\n5",
        "*errors*\n3",
        "*blocked*\n1",
        "*rejected*\n1",
        "*expired*\n1",
        "*mutating*\n7",
        "*requesters*\n3",
    ]
    assert blocks[3]["text"]["text"] == "*Runs*: runs 3, done 1, failed 2, cancelled 0"
    why = blocks[4]["text"]["text"]
    assert why.startswith("*Why runs failed*") and "refused the key (401)" in why
    assert SECRET not in why
    actions = blocks[6]["text"]["text"]
    assert (
        "k8s        restart         5      1   2       1        0         1        600     1000"
        in (actions)
    )
    assert blocks[7]["text"]["text"] == (
        "*Approvals*: requested 6, approved 4, rejected 1, expired 1, cancelled 0, pending 0, "
        "median time to decision 120 s, self-approvals 1"
    )
    assert blocks[8]["text"]["text"] == (
        "*Feedback on answers*: answers rated 1, thumbs up 2, thumbs down 1"
    )
    assert "k8s        restart         production" in blocks[10]["text"]["text"]
    calls = blocks[13]["text"]["text"].splitlines()
    assert calls[0] == "*Mutating calls (7)*"
    assert calls[1] == (
        '2026-11-18 12:06 U_ALICE pagerduty.acknowledge {"api_token":"[REDACTED]","id":"P1"} '
        "| approved, approved by U_LEAD | ok"
    )
    assert len(calls) == 8
    assert "2      k8s        restart         deployment not found" in blocks[14]["text"]["text"]


def test_feishu_card(audit_engine: Engine) -> None:
    card = feishu_card(seeded(audit_engine))
    assert card["schema"] == "2.0"
    assert card["header"]["title"]["content"] == "Audit report"
    contents = [e["content"] for e in card["body"]["elements"]]
    assert contents[1] == (
        "**Totals**: calls 11, ok 5, errors 3, blocked 1, rejected 1, expired 1, mutating 7, "
        "requesters 3"
    )
    assert contents[2] == "**Runs**: runs 3, done 1, failed 2, cancelled 0"
    assert contents[3].startswith("**Why runs failed**") and "refused the key" in contents[3]
    assert contents[6] == "**Feedback on answers**: answers rated 1, thumbs up 2, thumbs down 1"
    assert contents[8].startswith("**Approvals by rule**") and "production" in contents[8]
    calls = contents[10].splitlines()
    assert calls[:2] == ["**Mutating calls (7)**", "```"] and calls[-1] == "```"
    assert len(calls) == 10  # in a code block: nothing a tool wrote renders as Markdown
    assert calls[5] == (
        '- 2026-11-19 16:06 U_CAROL k8s.restart {"deployment":"web"} | approved, '
        "approved by U_CAROL | error: deployment not found"
    )
    assert SECRET not in json.dumps(card)


def huge_report() -> AuditReport:
    """2,000 mutating calls with long arguments and hostile text: far over every chat limit."""
    base = AuditQuery.window("7d", now=NOW)
    calls = [
        CallEntry(
            id=i,
            at=NOW - timedelta(minutes=i),
            platform="slack",
            channel="C1",
            requester=f"U{i:05d}",
            connector="k8s",
            action="restart",
            arguments={"deployment": "x" * 500, "note": "<!channel> & <@U1>"},
            approval_status="approved",
            approved_by=["U_LEAD"],
            result_status="ok",
            duration_ms=1.0,
        )
        for i in range(2000)
    ]
    empty = {
        "totals": {"calls": 2000, "mutating": 2000},
        "actions": [],
        "requesters": [],
        "approvals": {},
        "approvers": [],
        "errors": [
            {
                "connector": "k8s",
                "action": "restart",
                "error": "<at id=all></at> <!here> ``` boom",
                "count": 3,
                "last_at": NOW,
            }
        ],
    }
    return AuditReport(
        query=base,
        generated_at=NOW,
        mutating_calls=calls,
        mutating_calls_total=2500,
        **empty,
    )


def test_slack_limits_on_a_huge_report() -> None:
    blocks = slack_blocks(huge_report())
    assert len(blocks) <= SLACK_MAX_BLOCKS
    texts = [b["text"]["text"] for b in blocks if b["type"] == "section" and "text" in b]
    assert all(len(t) <= SLACK_SECTION_CHARS for t in texts)
    assert blocks_text_length(blocks) <= 12_000  # msg_blocks_too_long otherwise
    listed = sum(t.count("k8s.restart") for t in texts)
    assert 0 < listed < 2000
    notes = [b["elements"][0]["text"] for b in blocks if b["type"] == "context"]
    assert (
        f"{2500 - listed} more mutating calls: `chatops audit --format csv` lists them all" in notes
    )
    dumped = json.dumps(blocks)
    assert "<!channel>" not in dumped and "<!here>" not in dumped  # no mass mention from a report


def test_feishu_size_on_a_huge_report() -> None:
    card = feishu_card(huge_report())
    assert request_bytes(card) <= FEISHU_MAX_BYTES
    calls = card["body"]["elements"][9]["content"]
    listed = calls.count("k8s.restart")
    assert 0 < listed < 2000
    assert f"{2500 - listed} more mutating calls" in calls
    assert "<at id=all>" not in json.dumps(card)  # no @all from a report
