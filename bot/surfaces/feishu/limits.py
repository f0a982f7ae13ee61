"""Feishu's message size limit, measured as Feishu measures it: the request body.

A card travels as a JSON string (`content`) inside the JSON request body, so its text is escaped
twice: a quote costs 4 bytes, a backslash 4, a newline 3, a CJK character 3 (UTF-8; lark-oapi
sends `ensure_ascii=False`). Feishu refuses a card message whose request body is over 30 KB
(error 230025). Shared by the Feishu surface and the audit report's card renderer.
"""

from __future__ import annotations

import json
from typing import Any

CARD_REQUEST_LIMIT_BYTES = 30 * 1024  # Feishu's documented limit for a card message request
CARD_REQUEST_MAX_BYTES = 28_000  # what the renderers aim for: room for ids and the SDK's fields
REQUEST_OVERHEAD_BYTES = 200  # receive_id / uuid / msg_type around the content


def wire_bytes(text: str) -> int:
    """Bytes `text` takes inside a card inside the request body (escaped twice, UTF-8)."""
    once = json.dumps(text, ensure_ascii=False)[1:-1]
    return len(json.dumps(once, ensure_ascii=False)[1:-1].encode("utf-8"))


def request_bytes(card: dict[str, Any]) -> int:
    """The size of the request that sends `card`, as Feishu counts it against 30 KB."""
    content = json.dumps(card, ensure_ascii=False)
    body = json.dumps({"msg_type": "interactive", "content": content}, ensure_ascii=False)
    return len(body.encode("utf-8")) + REQUEST_OVERHEAD_BYTES
