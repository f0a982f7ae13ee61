"""FakeSlack answers the real slack_sdk client the way Slack does, errors and limits included."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_api import BOT_TOKEN, BOT_USER_ID, TEAM_ID, FakeSlack


@pytest.fixture
def client(fake_slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.url)


async def test_auth_and_bad_tokens(client, fake_slack):
    me = await client.auth_test()
    assert (me["team_id"], me["user_id"]) == (TEAM_ID, BOT_USER_ID)
    with pytest.raises(SlackApiError) as failed:
        await AsyncWebClient(token="xoxb-wrong", base_url=fake_slack.url).auth_test()
    assert failed.value.response["error"] == "invalid_auth"


async def test_thread_replies_and_users(client, fake_slack):
    root = (await client.chat_postMessage(channel="C1", text="root"))["ts"]
    reply = await client.chat_postMessage(channel="C1", text="reply", thread_ts=root)
    assert reply["message"]["thread_ts"] == root
    replies = await client.conversations_replies(channel="C1", ts=root)
    assert [m["text"] for m in replies["messages"]] == ["root", "reply"]
    fake_slack.add_user("U0LEAD", "lead")
    assert (await client.users_info(user="U0LEAD"))["user"]["real_name"] == "Lead"
    with pytest.raises(SlackApiError):
        await client.users_info(user="U0NOBODY")


async def test_slack_limits_are_enforced(client):
    with pytest.raises(SlackApiError) as too_long:
        await client.chat_postMessage(channel="C1", text="x" * 40_001)
    assert too_long.value.response["error"] == "msg_too_long"
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}
    with pytest.raises(SlackApiError) as bad:
        await client.chat_postMessage(channel="C1", text="t", blocks=[section])
    assert bad.value.response["error"] == "invalid_blocks"
    many = [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}] * 51
    with pytest.raises(SlackApiError):
        await client.chat_postMessage(channel="C1", text="t", blocks=many)


async def test_update_of_an_unknown_message_fails(client):
    with pytest.raises(SlackApiError) as failed:
        await client.chat_update(channel="C1", ts="1.000001", text="x")
    assert failed.value.response["error"] == "message_not_found"


async def test_429_without_a_retry_handler_reaches_the_caller(client, fake_slack):
    fake_slack.fail_next("chat.postMessage", status=429, headers={"Retry-After": "7"})
    with pytest.raises(SlackApiError) as limited:
        await client.chat_postMessage(channel="C1", text="x")
    assert limited.value.response.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "7"
    assert (await client.chat_postMessage(channel="C1", text="x"))["ok"] is True


async def test_blocks_and_dialogs_slack_would_refuse_are_refused(client):
    """Checked with slack_sdk's own Block Kit models: unknown types, unknown fields, a
    mrkdwn object inside rich_text, an empty rich text, a modal title over 24 characters."""
    bad_blocks = [
        [{"type": "fancy", "text": "hi"}],
        [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}, "colour": "red"}],
        [{"type": "rich_text", "elements": [
            {"type": "rich_text_section", "elements": [{"type": "mrkdwn", "text": "*x*"}]}]}],
        [{"type": "rich_text", "elements": [
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": ""}]}]}],
    ]  # fmt: skip
    for blocks in bad_blocks:
        with pytest.raises(SlackApiError) as refused:
            await client.chat_postMessage(channel="C1", text="t", blocks=blocks)
        assert refused.value.response["error"] == "invalid_blocks"
    good = [
        {
            "type": "rich_text",
            "elements": [
                {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "```*x*"}]}
            ],
        }
    ]
    assert (await client.chat_postMessage(channel="C1", text="t", blocks=good))["ok"]  # fmt: skip
    title = {"type": "plain_text", "text": "A title much longer than Slack allows"}
    with pytest.raises(SlackApiError):
        await client.views_open(
            trigger_id="1.2.3", view={"type": "modal", "title": title, "blocks": []}
        )


async def test_views_open_takes_a_trigger_once_and_inputs_need_a_submit(client):
    """Like Slack: no trigger_id, a used one, or an input block without a submit button is
    refused (the question and edit modals each open on their click's own trigger)."""
    title = {"type": "plain_text", "text": "Answer"}
    field = {"type": "input", "block_id": "arg:x", "label": title,
             "element": {"type": "plain_text_input", "action_id": "value"}}  # fmt: skip
    modal = {"type": "modal", "title": title, "submit": title, "blocks": [field]}
    assert (await client.views_open(trigger_id="7.1.a", view=modal))["ok"]
    for trigger, view, error in (
        ("7.1.a", modal, "exchanged_trigger_id"),
        ("", modal, "invalid_trigger_id"),
        ("7.2.b", {k: v for k, v in modal.items() if k != "submit"}, "invalid_arguments"),
    ):
        with pytest.raises(SlackApiError) as refused:
            await client.views_open(trigger_id=trigger, view=view)
        assert refused.value.response["error"] == error


async def test_dms_and_permalinks_need_their_arguments_and_a_token(client, fake_slack):
    """conversations.open and chat.getPermalink, as the approval routing uses them."""
    opened = await client.conversations_open(users="U0LEAD")
    assert opened["channel"]["id"] == fake_slack.dms["U0LEAD"]
    assert (await client.conversations_open(users=["U0LEAD"]))["channel"] == opened["channel"]
    for params, error in (({}, "users_list_not_supplied"), ({"users": "nobody"}, "user_not_found")):
        with pytest.raises(SlackApiError) as refused:  # the SDK checks the first itself
            await client.api_call("conversations.open", params=params)
        assert refused.value.response["error"] == error
    fake_slack.add_user("U0LEAD", "lead")  # a workspace that knows its users
    with pytest.raises(SlackApiError) as unknown:
        await client.conversations_open(users="U0OTHER")
    assert unknown.value.response["error"] == "user_not_found"

    link = await client.chat_getPermalink(channel="C1", message_ts="1700000000.000123")
    assert link["permalink"] == "https://fake-team.slack.com/archives/C1/p1700000000000123"
    for kwargs, error in (
        ({"channel": "", "message_ts": "1700000000.000123"}, "channel_not_found"),
        ({"channel": "C1", "message_ts": "soon"}, "message_not_found"),
    ):
        with pytest.raises(SlackApiError) as refused:
            await client.chat_getPermalink(**kwargs)
        assert refused.value.response["error"] == error
    anonymous = AsyncWebClient(token="xoxb-wrong", base_url=fake_slack.url)
    for call in (
        anonymous.conversations_open(users="U0LEAD"),
        anonymous.chat_getPermalink(channel="C1", message_ts="1700000000.000123"),
    ):
        with pytest.raises(SlackApiError) as refused:
            await call
        assert refused.value.response["error"] == "invalid_auth"


def _error(failed: pytest.ExceptionInfo[SlackApiError]) -> str:
    return str(failed.value.response["error"])


async def test_streams_take_appends_until_stopped_and_know_their_recipient(client, fake_slack):
    with pytest.raises(SlackApiError) as missing:
        await client.chat_startStream(channel="C1", thread_ts="1.1", markdown_text="hi")
    assert _error(missing) == "missing_recipient_team_id"
    started = await client.chat_startStream(
        channel="C1", thread_ts="1.1", markdown_text="Hel",
        recipient_team_id=TEAM_ID, recipient_user_id="U0DEV",
    )  # fmt: skip
    ts = started["ts"]
    await client.chat_appendStream(channel="C1", ts=ts, markdown_text="lo")
    with pytest.raises(SlackApiError) as too_long:
        await client.chat_appendStream(channel="C1", ts=ts, markdown_text="x" * 12_001)
    assert _error(too_long) == "msg_too_long"
    with pytest.raises(SlackApiError) as mid_stream:
        await client.chat_update(channel="C1", ts=ts, text="not yet")
    assert _error(mid_stream) == "cant_update_message"
    await client.chat_stopStream(channel="C1", ts=ts, markdown_text="!")
    assert fake_slack.messages[("C1", ts)]["text"] == "Hello!"
    with pytest.raises(SlackApiError) as stopped:
        await client.chat_appendStream(channel="C1", ts=ts, markdown_text="more")
    assert _error(stopped) == "message_not_in_streaming_state"


async def test_a_stream_a_person_stopped_refuses_appends(client, fake_slack):
    ts = (await client.chat_startStream(channel="D1", thread_ts="1.1", markdown_text="a"))["ts"]
    fake_slack.user_stops(ts)
    with pytest.raises(SlackApiError) as refused:
        await client.chat_appendStream(channel="D1", ts=ts, markdown_text="b")
    assert _error(refused) == "stopped_by_user"


async def test_plan_task_and_feedback_blocks_are_validated_deeply(client, fake_slack):
    text = {"type": "rich_text", "elements": [
        {"type": "rich_text_section", "elements": [{"type": "text", "text": "ok"}]}]}  # fmt: skip
    task = {"type": "task_card", "task_id": "t1", "title": "ops__status", "status": "complete",
            "output": text}  # fmt: skip
    good = {"type": "plan", "title": "Working", "tasks": [task]}
    await client.chat_postMessage(channel="C1", text="t", blocks=[good])
    for bad in (
        {**good, "tasks": [{**task, "bogus": 1}]},  # an unknown field in a task
        {**good, "tasks": [{**task, "status": "done"}]},  # not one of Slack's four states
        {**good, "tasks": [{**task, "output": {"type": "rich_text", "elements": [
            {"type": "rich_text_section", "elements": [{"type": "text", "text": ""}]}]}}]},
        {**good, "title": ""},
    ):  # fmt: skip
        with pytest.raises(SlackApiError) as refused:
            await client.chat_postMessage(channel="C1", text="t", blocks=[bad])
        assert _error(refused) == "invalid_blocks"
    feedback = {"type": "context_actions", "elements": [{
        "type": "feedback_buttons", "action_id": "fb",
        "positive_button": {"text": {"type": "plain_text", "text": "x" * 76}, "value": "up"},
        "negative_button": {"text": {"type": "plain_text", "text": "no"}, "value": "down"},
    }]}  # fmt: skip
    with pytest.raises(SlackApiError) as long_label:
        await client.chat_postMessage(channel="C1", text="t", blocks=[feedback])
    assert _error(long_label) == "invalid_blocks"  # a button's text is at most 75 characters
    fake_slack.refuse_block_type("plan")
    with pytest.raises(SlackApiError) as old_workspace:
        await client.chat_postMessage(channel="C1", text="t", blocks=[good])
    assert _error(old_workspace) == "invalid_blocks"


async def test_agent_sessions_and_features_turned_off(client, fake_slack):
    with pytest.raises(SlackApiError) as bad:
        await client.agents_sessions_setStatus(channel_id="C1", thread_ts="1.1", status="busy")
    assert _error(bad) == "invalid_status"
    with pytest.raises(SlackApiError) as threadless:
        await client.agents_sessions_setStatus(channel_id="C1", status="processing")
    assert _error(threadless) == "thread_ts_required"
    fake_slack.stop_events_subscribed = False
    answer = await client.agents_sessions_setStatus(
        channel_id="C1", thread_ts="1.1", status="processing", title="restart api"
    )
    assert answer["warning"] == "missing_agent_session_stopped_event_subscription"
    await client.agents_sessions_setStatus(channel_id="C1", thread_ts="1.1", status="closed")
    assert fake_slack.session_statuses("C1", "1.1") == ["processing", "closed"]
    fake_slack.turn_off("agents.sessions.setStatus", "feature_disabled")
    with pytest.raises(SlackApiError) as off:
        await client.agents_sessions_setStatus(channel_id="C1", thread_ts="1.1", status="active")
    assert _error(off) == "feature_disabled"


async def test_per_workspace_limits_answer_429_per_team_and_channel(fake_slack):
    """Opt-in: Tier 3 chat.update, 50 a minute per workspace (a burst of 50, then 429 with
    Retry-After, without acting); another workspace keeps its own budget; chat.postMessage
    about one a second per channel, so another channel of the same team still posts."""
    fake_slack.register_app("1.2", "s3cret", None)
    for team, channel in (("TA", "CA"), ("TA", "CA2"), ("TB", "CB")):
        fake_slack.add_channel(channel, team)

    async def client_of(team: str) -> AsyncWebClient:
        code = fake_slack.authorize(team, client_id="1.2", redirect_uri=None)
        granted = await AsyncWebClient(base_url=fake_slack.url).oauth_v2_access(
            client_id="1.2", client_secret="s3cret", code=code
        )
        return AsyncWebClient(token=granted["access_token"], base_url=fake_slack.url)

    a, b = await client_of("TA"), await client_of("TB")
    root = (await a.chat_postMessage(channel="CA", text="root"))["ts"]
    other = (await b.chat_postMessage(channel="CB", text="root"))["ts"]
    fake_slack.enforce_limits()
    for i in range(50):
        await a.chat_update(channel="CA", ts=root, text=f"edit {i}")
    with pytest.raises(SlackApiError) as limited:
        await a.chat_update(channel="CA", ts=root, text="one too many")
    assert limited.value.response.status_code == 429
    assert int(limited.value.response.headers["Retry-After"]) >= 1
    assert fake_slack.messages[("CA", root)]["text"] == "edit 49"  # refused, not applied
    await b.chat_update(channel="CB", ts=other, text="B has its own budget")
    for i in range(3):  # the channel's short burst
        await a.chat_postMessage(channel="CA", text=f"post {i}")
    with pytest.raises(SlackApiError) as posted:
        await a.chat_postMessage(channel="CA", text="too fast")
    assert posted.value.response.status_code == 429
    await a.chat_postMessage(channel="CA2", text="another channel")
    assert [c.method for c in fake_slack.rate_limited] == ["chat.update", "chat.postMessage"]


async def test_limits_are_off_unless_asked(client, fake_slack):
    root = (await client.chat_postMessage(channel="C1", text="root"))["ts"]
    for i in range(80):
        await client.chat_update(channel="C1", ts=root, text=f"edit {i}")
    assert fake_slack.rate_limited == []
