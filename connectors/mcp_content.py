"""An MCP tool result as the text the model reads: every content block kept in words.

A tool may answer with text, images, audio, resource links and embedded resources. The model
reads a tool result as text (a chat completions `tool` message carries text only), so:

- text is passed as is; an embedded text resource is passed with its URI and media type, and
  so is a binary one that holds text (a text media type, valid UTF-8: servers send text as
  base64 too);
- a resource link is passed as its URI, name, media type, size and (cleaned) description, so the
  model can name it to the user or pass it to another tool;
- an image, audio clip or binary resource is described (kind, media type, size, URI). An image
  of a kind models read (PNG, JPEG, GIF, WebP), valid base64 and at most `MAX_IMAGE_BYTES`, also
  rides beside the text as a `ToolImage` (at most `MAX_IMAGES` per result): the engine shows it
  to a model with the `vision` ability as an image part. Its bytes are never in the text, so the
  call log, the status and the audit read the description only.

Everything here is the server's words: descriptions and names are cleaned like tool
descriptions, and the whole text is redacted before it is cut (`render_result`).
"""

from __future__ import annotations

import base64
import binascii
import json
from functools import partial

import mcp_types

from bot.engine.tools import ToolImage, ToolResult
from bot.redaction import redact_text
from connectors.manifest import ResultSpec
from connectors.mcp_text import clean_text
from connectors.results import render_result

MAX_LABEL_CHARS = 300  # a name, a title or a description the server gave a resource
MAX_IMAGE_BYTES = 4 * 1024 * 1024  # larger images are described only (each is resent per turn)
MAX_IMAGES = 4  # per result
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/yaml"})
MAX_TEXT_BLOB_BYTES = 1024 * 1024  # larger text blobs are described only (the result is cut)


def describe_size(size: int) -> str:
    """A byte count as people read it (`512 bytes`, `12.3 KB`, `4.0 MB`)."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _decoded_size(data: str) -> int:
    """The size of base64 `data` once decoded, without decoding it."""
    data = data.strip()
    return max(len(data) * 3 // 4 - data[-2:].count("="), 0)


def _label(text: str | None) -> str:
    return clean_text(text or "", MAX_LABEL_CHARS)


def _binary(kind: str, mime: str | None, data: str, uri: str = "") -> str:
    where = f" {uri}" if uri else ""
    what = ", ".join(part for part in (mime, describe_size(_decoded_size(data))) if part)
    return f"[{kind}{where} ({what}): not shown to the model]"


def blob_text(mime: str | None, data: str) -> str | None:
    """The text a binary resource holds when its media type says text and it decodes as UTF-8,
    else None (it is then described, never guessed at)."""
    kind = (mime or "").split(";")[0].strip().lower()
    if not (kind.startswith("text/") or kind in TEXT_TYPES):
        return None
    if _decoded_size(data) > MAX_TEXT_BLOB_BYTES:
        return None
    try:
        return base64.b64decode("".join(data.split()), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def viewable_image(block: mcp_types.ImageContent) -> ToolImage | None:
    """The image as a model may be shown it, or None: a kind models do not read, too large,
    or not valid base64 (a server's bytes are checked before a model's API sees them)."""
    mime = (block.mime_type or "").lower()
    if mime not in IMAGE_TYPES or _decoded_size(block.data) > MAX_IMAGE_BYTES:
        return None
    data = "".join(block.data.split())
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return ToolImage(mime, data)


def _image(block: mcp_types.ImageContent, images: list[ToolImage]) -> str:
    """An image block in words; a viewable one is also kept in `images`, numbered."""
    image = viewable_image(block) if len(images) < MAX_IMAGES else None
    what = ", ".join(p for p in (block.mime_type, describe_size(_decoded_size(block.data))) if p)
    if image is None:
        return f"[image ({what}): not shown to the model]"
    images.append(image)
    return f"[image {len(images)} ({what})]"


def render_block(block: mcp_types.ContentBlock, images: list[ToolImage] | None = None) -> str:
    """One content block in words (see the module docstring); a viewable image also goes
    into `images` when it is given."""
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        if images is None:
            return _binary("image", block.mime_type, block.data)
        return _image(block, images)
    if isinstance(block, mcp_types.AudioContent):
        return _binary("audio", block.mime_type, block.data)
    if isinstance(block, mcp_types.ResourceLink):
        details = [part for part in (block.mime_type,) if part]
        if block.size is not None:
            details.append(describe_size(block.size))
        name = _label(block.title or block.name)
        line = f"[resource link: {block.uri}" + (f" {name!r}" if name else "")
        line += f" ({', '.join(details)})]" if details else "]"
        description = _label(block.description)
        return f"{line} {description}" if description else line
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            mime = f" ({resource.mime_type})" if resource.mime_type else ""
            return f"[resource {resource.uri}{mime}]\n{resource.text}"
        text = blob_text(resource.mime_type, resource.blob)
        if text is not None:
            return f"[resource {resource.uri} ({resource.mime_type})]\n{text}"
        return _binary("resource", resource.mime_type, resource.blob, resource.uri)
    return f"[{getattr(block, 'type', 'unknown')} content omitted]"  # a newer kind of block


def render_call_result(
    result: mcp_types.CallToolResult, spec: ResultSpec, *, secrets: list[str]
) -> ToolResult:
    """Every block in words, one after the other; structured content when there is no text.
    Redacted before it is cut, so a secret at the cut point is still recognised."""
    images: list[ToolImage] = []
    text = "\n".join(render_block(block, images) for block in result.content)
    if not text.strip() and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    redact = partial(redact_text, secrets=secrets)
    rendered = render_result(text, "", spec, redact=redact) if text.strip() else "(no content)"
    return ToolResult(rendered, is_error=bool(result.is_error), images=tuple(images))
