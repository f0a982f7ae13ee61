"""FakeSlack's agent methods: answer streams (chat.startStream / appendStream / stopStream),
agents.sessions.setStatus and chat.delete, validated the way Slack documents them.

Mixed into `FakeSlack` (tests/fakes/slack_api.py), whose `_respond` finds the `_m_*` methods.
A streamed message lives in `messages` like any other: its `text` grows with each append, its
`blocks` are one `markdown` block (plus the stop's blocks), `streaming` says whether it still
takes appends. Features a workspace lacks are data: `turn_off("chat.startStream",
"not_allowed")` answers every call of the method with that error; `refuse_block_type("plan")`
refuses messages carrying such a block (`invalid_blocks`, as a workspace without it does);
`user_stops(ts)` is a person pressing Slack's own stop on a stream (`stopped_by_user`).
"""

from __future__ import annotations

from typing import Any

MARKDOWN_LIMIT = 12_000  # markdown_text of one call (chat.*Stream)
SESSION_STATUSES = frozenset({"active", "processing", "suspended", "closed"})
NO_STOP_EVENTS = "missing_agent_session_stopped_event_subscription"


class AgentMethods:
    """The agent-era Web API methods of FakeSlack (state lives on the FakeSlack instance)."""

    messages: dict[tuple[str, str], dict[str, Any]]
    team_id: str
    users: dict[str, dict[str, Any]]

    def _agent_state(self) -> None:
        self.unavailable: dict[str, str] = {}  # method -> error: the feature is off
        self.refused_block_types: set[str] = set()
        self.sessions: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (channel, thread)
        self.stop_events_subscribed = True
        self.deleted: list[dict[str, Any]] = []

    # scripting -------------------------------------------------------------------------

    def turn_off(self, method: str, error: str = "not_allowed") -> None:
        """Every later call of `method` fails with `error` (the app or workspace lacks it)."""
        self.unavailable[method] = error

    def refuse_block_type(self, block_type: str) -> None:
        """Messages with a block of this type are refused with `invalid_blocks`."""
        self.refused_block_types.add(block_type)

    def user_stops(self, ts: str) -> None:
        """Someone presses Slack's stop on the stream `ts`: no more appends are taken."""
        for (_, msg_ts), message in self.messages.items():
            if msg_ts == ts:
                message["streaming"] = False
                message["stopped_by_user"] = True

    def session_statuses(self, channel: str, thread_ts: str) -> list[str]:
        return [entry["status"] for entry in self.sessions.get((channel, thread_ts), [])]

    # helpers ---------------------------------------------------------------------------

    def _stream_text(self, args: dict[str, Any]) -> tuple[str | None, str]:
        """(an error, the text) of a call's markdown_text / chunks."""
        text, chunks = args.get("markdown_text"), args.get("chunks")
        if text is not None and chunks:
            return "cannot_provide_both_markdown_text_and_chunks", ""
        if chunks:
            pieces = []
            for chunk in chunks:
                if not isinstance(chunk, dict) or chunk.get("type") != "markdown_text":
                    return "invalid_chunks", ""  # the bot streams markdown only
                if set(chunk) != {"type", "text"} or not isinstance(chunk["text"], str):
                    return "invalid_chunks", ""
                pieces.append(chunk["text"])
            text = "".join(pieces)
        if text is not None and not isinstance(text, str):
            return "invalid_arguments", ""
        if text is not None and len(text) > MARKDOWN_LIMIT:
            return "msg_too_long", ""
        return None, text or ""

    def _streamed(self, args: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
        message = self.messages.get((args.get("channel", ""), args.get("ts", "")))
        if message is None:
            return "message_not_found", None
        if message.get("stopped_by_user"):
            return "stopped_by_user", None
        if not message.get("streaming"):
            return "message_not_in_streaming_state", None
        return None, message

    # the methods -----------------------------------------------------------------------

    def _m_chat_startStream(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = str(args.get("channel") or ""), str(args.get("thread_ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not channel.startswith("D"):  # outside a DM Slack must know whom it streams to
            if not args.get("recipient_team_id"):
                return {"ok": False, "error": "missing_recipient_team_id"}
            if not args.get("recipient_user_id"):
                return {"ok": False, "error": "missing_recipient_user_id"}
            if self.users and args["recipient_user_id"] not in self.users:
                return {"ok": False, "error": "user_not_found"}
        if args.get("task_display_mode") not in (None, "timeline", "plan", "dense"):
            return {"ok": False, "error": "invalid_arguments"}
        error, text = self._stream_text(args)
        if error:
            return {"ok": False, "error": error}
        ts = self._next_ts()  # type: ignore[attr-defined]
        self.messages[(channel, ts)] = {
            "type": "message", "user": "U0BOT", "bot_id": "B0BOT", "team": self.team_id,
            "text": text, "blocks": [], "ts": ts, "streaming": True,
            "recipient_user_id": args.get("recipient_user_id"),
            **({"thread_ts": thread_ts} if thread_ts else {}),
        }  # fmt: skip
        return {"ok": True, "channel": channel, "ts": ts}

    def _m_chat_appendStream(self, args: dict[str, Any]) -> dict[str, Any]:
        error, message = self._streamed(args)
        if error or message is None:
            return {"ok": False, "error": error}
        error, text = self._stream_text(args)
        if error:
            return {"ok": False, "error": error}
        if not text:
            return {"ok": False, "error": "markdown_text_or_chunks_required"}
        message["text"] += text
        return {"ok": True, "channel": args["channel"], "ts": args["ts"]}

    def _m_chat_stopStream(self, args: dict[str, Any]) -> dict[str, Any]:
        error, message = self._streamed(args)
        if error or message is None:
            return {"ok": False, "error": error}
        error, text = self._stream_text(args)
        if error:
            return {"ok": False, "error": error}
        blocks = args.get("blocks") or []
        if len(blocks) > 50:
            return {"ok": False, "error": "msg_blocks_too_many"}
        if not all(self._block_ok(b) for b in blocks):  # type: ignore[attr-defined]
            return {"ok": False, "error": "invalid_blocks"}
        if args.get("session_status") not in (None, *SESSION_STATUSES):
            return {"ok": False, "error": "invalid_arguments"}
        message["text"] += text
        message["streaming"] = False
        message["blocks"] = [{"type": "markdown", "text": message["text"]}, *blocks]
        return {"ok": True, "channel": args["channel"], "ts": args["ts"], "message": message}

    def _m_chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (str(args.get("channel") or ""), str(args.get("ts") or ""))
        message = self.messages.pop(key, None)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        self.deleted.append(message)
        return {"ok": True, "channel": key[0], "ts": key[1]}

    def _m_agents_sessions_setStatus(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = str(args.get("channel_id") or ""), str(args.get("thread_ts") or "")
        status = args.get("status")
        if status not in SESSION_STATUSES:
            return {"ok": False, "error": "invalid_status"}
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not thread_ts:
            return {"ok": False, "error": "thread_ts_required"}
        if len(str(args.get("title") or "")) > 200:
            return {"ok": False, "error": "invalid_arguments"}
        initiator = args.get("initiator_user_id")
        if initiator and self.users and initiator not in self.users:
            return {"ok": False, "error": "user_not_found"}
        history = self.sessions.setdefault((channel, thread_ts), [])
        entry = {"status": status}
        if not history:  # title and initiator count only when the session is created
            entry.update(title=args.get("title"), initiator_user_id=initiator)
        history.append(entry)
        answer: dict[str, Any] = {"ok": True, "status": status}
        if not self.stop_events_subscribed and status == "processing":
            answer["warning"] = NO_STOP_EVENTS
        return answer
