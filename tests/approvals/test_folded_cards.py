"""Decided cards fold to one line (tool and outcome, by whom, when, the comment) with the
details behind a "show" control: on Slack a "Show details" button beside the line opens the
whole card in a modal (both validated by the fake as Slack validates blocks and views); on
Feishu a closed `collapsible_panel` (checked by the fake as Feishu parses card JSON 2.0). The
console's `<details>` is in tests/browser/test_console_journey.py."""

from __future__ import annotations

import json

from bot.surfaces.slack.cards import APPROVE_COMMENT_ACTION, CARD_DETAILS_ACTION, DETAILS_MODAL
from tests.approvals.test_rules import restart
from tests.fakes.feishu_elements import elements_problem
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack, valid_block
from tests.feishu.e2e import FeishuBot, approval_message, has_form
from tests.feishu.e2e import wait_card as wait_feishu_card
from tests.security.conftest import approval_cards, is_pending, wait_cards
from tests.slack.e2e import SlackBot
from tests.slack.payloads import block_actions, mention, view_submission

COMMENT = "fine, the release is over"


async def test_slack_a_decided_card_is_one_line_and_its_details_open_in_a_modal(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.script(*restart("api", "dev"))
    event = mention("restart api on dev", user="U0DEV")
    root = event["event"]["ts"]
    await slack_bot.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    await slack_bot.click(card, APPROVE_COMMENT_ACTION, user="U0LEAD")
    [opened] = fake_slack.calls("views.open")
    await slack_bot.send(view_submission(opened.args["view"], user="U0LEAD", reason=COMMENT))
    await slack_bot.wait_idle()
    assert ops_api.restarts == ["api"]

    [folded] = await fake_slack.wait_for(
        lambda: (cards := approval_cards(fake_slack, root)) and not is_pending(cards[0]) and cards
    )
    blocks = folded["blocks"]
    assert [b["type"] for b in blocks] == ["header", "section", "context"]
    assert all(valid_block(b) for b in blocks)
    assert blocks[0]["text"]["text"] == "Approval: ops.restart"
    line = blocks[1]["text"]["text"]
    assert line.startswith(":white_check_mark: Approved by <@U0LEAD> \u00b7 <!date^")
    assert blocks[1]["accessory"]["action_id"] == CARD_DETAILS_ACTION
    assert blocks[2]["elements"] == [{"type": "plain_text", "text": f"\u201c{COMMENT}\u201d"}]
    assert '"name": "api"' not in json.dumps(blocks)  # the arguments are folded away

    # a forged "show details" (this approval's id, from another message) opens nothing
    forged = block_actions(folded, CARD_DETAILS_ACTION, user="U0DEV", message_ts=root)
    await slack_bot.send(forged)
    await slack_bot.wait_idle()
    assert len(fake_slack.calls("views.open")) == 1

    await slack_bot.send(block_actions(folded, CARD_DETAILS_ACTION, user="U0DEV"))
    details = await fake_slack.wait_for(lambda: fake_slack.calls("views.open")[1:])
    modal = details[0].args["view"]  # the fake opened it: a valid view with valid blocks
    assert modal["callback_id"] == DETAILS_MODAL and "submit" not in modal
    shown = json.dumps(modal["blocks"])
    assert (
        '\\"name\\": \\"api\\"' in shown and COMMENT in shown and "Approved by <@U0LEAD>" in shown
    )


async def test_feishu_a_decided_card_folds_its_details_into_a_closed_panel(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake = feishu_bot.fake
    fake_openai.script(*restart("api", "dev"))
    event = fake.message_event("restart api on dev", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await feishu_bot.send(event)
    card = await wait_feishu_card(fake, root, pending=True)
    await feishu_bot.click(card, "reject", user="ou_lead", reason=COMMENT)
    await feishu_bot.wait_idle()
    assert ops_api.calls == []
    await fake.wait_for(lambda f: not has_form(approval_message(f, root).content))
    shown = approval_message(fake, root)
    content = shown.content
    assert elements_problem(shown.contents[-1]) is None  # the fake took it: so would Feishu
    assert content["header"]["title"]["content"] == "Rejected: ops__restart"
    line, comment, panel = content["body"]["elements"]
    assert line["content"].startswith("**Rejected** by <at id=ou_lead></at> · ")
    assert comment["text"] == {"tag": "plain_text", "content": f"\u201c{COMMENT}\u201d"}
    assert panel["tag"] == "collapsible_panel" and panel["expanded"] is False
    assert panel["header"]["title"] == {"tag": "plain_text", "content": "Details"}
    assert '\\"name\\": \\"api\\"' in json.dumps(panel["elements"])


def test_the_fake_feishu_refuses_a_malformed_panel() -> None:
    """The fake's check can fail: a panel without a title, inside a form, or in a 1.0 card."""

    def card(panel: dict, *, schema: str = "2.0", in_form: bool = False) -> str:
        element = {"tag": "form", "name": "f", "elements": [panel]} if in_form else panel
        if schema == "2.0":
            return json.dumps({"schema": "2.0", "body": {"elements": [element]}})
        return json.dumps({"elements": [element]})

    good = {"tag": "collapsible_panel", "expanded": False,
            "header": {"title": {"tag": "plain_text", "content": "Details"}},
            "elements": [{"tag": "markdown", "content": "x"}]}  # fmt: skip
    assert elements_problem(card(good)) is None
    assert elements_problem(card({**good, "header": {}})) is not None
    assert elements_problem(card({**good, "expanded": "no"})) is not None
    assert elements_problem(card({**good, "elements": []})) is not None
    assert elements_problem(card(good, in_form=True)) is not None
    assert elements_problem(card(good, schema="1.0")) is not None
