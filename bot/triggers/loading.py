"""Loading triggers: YAML files -> validated `Trigger`s, with errors a user can act on.

The connector manifests' machinery does the reading (`connectors.loading.read_yaml`: UTF-8,
syntax errors with line and column, alias bombs) and the wording of schema errors
(`describe_validation_error`); here each schema error also gets the line and column of its
field, and names are checked unique (two files cannot share a route).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.errors import TriggerError
from bot.triggers.schema import Trigger
from connectors.loading import describe_validation_error, manifest_files, read_yaml, yaml_position
from connectors.manifest import ManifestError


class TriggerFileError(TriggerError):
    """A trigger file problem; the message names the file, the field, its line and column."""


def parse_trigger(data: Any, *, source: str, text: str = "") -> Trigger:
    """Validate one parsed trigger file (`text`: its YAML, for line and column)."""
    if not isinstance(data, dict):
        raise TriggerFileError(f"{source}: a trigger must be a YAML mapping")
    try:
        return Trigger.model_validate(data)
    except ValidationError as exc:
        raise TriggerFileError(_describe(exc, data, source, text)) from None


def _describe(exc: ValidationError, data: Mapping[str, Any], source: str, text: str) -> str:
    """The manifests' one line per error, each with its field's line and column."""
    lines = describe_validation_error(exc, data, source).splitlines()
    placed = []
    for line, error in zip(lines, exc.errors(), strict=True):
        position = yaml_position(text, list(error["loc"])) if text else None
        if position is not None:
            head, _, rest = line.partition(": ")
            line = f"{head} (line {position[0]}, column {position[1]}): {rest}"
        placed.append(line)
    return "\n".join(placed)


def load_trigger_file(path: Path) -> Trigger:
    """Read and validate one trigger file."""
    try:
        data = read_yaml(path)
        text = path.read_text(encoding="utf-8")
    except ManifestError as exc:
        raise TriggerFileError(str(exc)) from None
    return parse_trigger(data, source=str(path), text=text)


def load_trigger_dir(directory: Path, *, slack_oauth: bool = False) -> list[tuple[Path, Trigger]]:
    """Every trigger in a directory (`*.yaml`, `*.yml`); all problems together, one a line.
    `slack_oauth`: Slack serves many workspaces (OAuth installs), so a Slack trigger must name
    its team in `where.workspace` (there is no bot's own workspace to default to)."""
    try:
        files = manifest_files(directory)
    except ManifestError as exc:
        raise TriggerFileError(str(exc)) from None
    loaded: list[tuple[Path, Trigger]] = []
    problems: list[str] = []
    seen: dict[str, Path] = {}
    for path in files:
        try:
            trigger = load_trigger_file(path)
        except TriggerFileError as exc:
            problems.append(str(exc))
            continue
        if trigger.name in seen:
            problems.append(
                f"{path}: field 'name': trigger {trigger.name!r} is also defined in "
                f"{seen[trigger.name]} (both would be POST /hooks/{trigger.name})"
            )
            continue
        seen[trigger.name] = path
        if slack_oauth and trigger.where.platform == "slack" and not trigger.where.workspace:
            problems.append(
                f"{path}: field 'where.workspace': trigger {trigger.name!r} posts in Slack, "
                "which serves many workspaces here (OAuth installs, SLACK_CLIENT_ID): name the "
                "team id (T...) whose installation opens its threads"
            )
            continue
        loaded.append((path, trigger))
    if problems:
        raise TriggerFileError("\n".join(problems))
    return loaded
