"""Loading manifests: YAML files -> validated models, with errors a user can act on.

Every problem names the file, the action (by name and index) and the field, one per line, and
no pydantic or YAML traceback ever reaches the user. Tool names are checked here too: they must
be valid OpenAI function names and unique.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from connectors.manifest import (
    BASE_URL_RE,
    CHECKED_SCHEMAS,
    MANIFEST_ADAPTER,
    TOOL_NAME_RE,
    AnyConnector,
    HttpConnector,
    ManifestError,
    McpConnector,
)
from connectors.manifest_auth import auth_missing
from connectors.manifest_rules import rule_location
from connectors.sql.manifest import SqlConnector

MAX_YAML_VALUES = 200_000  # far beyond any manifest; bounds the work an alias bomb can cause
# libyaml's loader when PyYAML was built with it: four times faster on big (imported) manifests
YAML_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
YAML_DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the same, writing


def parse_manifest(
    data: Any, *, source: str = "<manifest>", checked: set[str] | None = None
) -> AnyConnector:
    """Validate one parsed manifest; errors name the file, action and field. `checked`: the
    parameter schemas already found valid (shared by the files of one directory, so a schema
    repeated across manifests, as in copies of one imported API, is checked once)."""
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: a manifest must be a YAML mapping", path=source)
    data = {"type": "http", **data}
    try:
        manifest = MANIFEST_ADAPTER.validate_python(
            data, context={CHECKED_SCHEMAS: checked if checked is not None else set()}
        )
    except ValidationError as exc:
        raise ManifestError(describe_validation_error(exc, data, source), path=source) from None
    except RecursionError:
        raise ManifestError(f"{source}: nested too deeply to check", path=source) from None
    _check_tool_names(manifest, source)
    return manifest


def read_yaml(path: Path) -> Any:
    """The data of a YAML (or JSON) file; anything unreadable is a `ManifestError` naming the
    file: not UTF-8, a syntax error (with line and column), an impossible value (a date such
    as 2020-13-45), or an alias that contains itself."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror}", path=path) from None
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{path}: not UTF-8 text (byte {exc.start} is 0x{exc.object[exc.start]:02x}); "
            "save it as UTF-8",
            path=path,
        ) from None
    try:
        data = yaml.load(text, Loader=YAML_LOADER)  # a safe loader, C or Python
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ManifestError(f"{path}: invalid YAML{where}: {problem}", path=path) from None
    except (ValueError, RecursionError) as exc:
        raise ManifestError(f"{path}: invalid YAML value: {exc}", path=path) from None
    # a document without aliases has fewer values than characters: only aliases go beyond both
    problem = _shape_problem(data, limit=max(MAX_YAML_VALUES, len(text)))
    if problem:
        raise ManifestError(f"{path}: invalid YAML: {problem}", path=path)
    return data


def _shape_problem(data: Any, *, limit: int = MAX_YAML_VALUES) -> str:
    """Why the loaded data cannot be validated: a mapping or list that contains itself (an
    alias to an enclosing anchor), or more values than any manifest has once aliases are
    expanded (a "billion laughs" document); '' when neither."""
    inside: set[int] = set()
    pending: list[tuple[Any, bool]] = [(data, False)]
    visited = 0
    while pending:
        node, leaving = pending.pop()
        if leaving:
            inside.discard(id(node))
            continue
        visited += 1
        if visited > limit:
            return f"more than {limit} values once aliases are expanded"
        if not isinstance(node, dict | list):
            continue
        if id(node) in inside:
            return "an alias (*name) contains itself"
        inside.add(id(node))
        pending.append((node, True))
        children = node.values() if isinstance(node, dict) else node
        pending.extend((child, False) for child in children)
    return ""


def load_manifest_file(path: Path, *, checked: set[str] | None = None) -> AnyConnector:
    """Read and validate one YAML manifest (`checked`: see `parse_manifest`)."""
    return parse_manifest(read_yaml(path), source=str(path), checked=checked)


def manifest_files(directory: Path) -> list[Path]:
    """The manifest files of a directory, sorted (`*.yaml` and `*.yml`)."""
    if not directory.is_dir():
        raise ManifestError(f"{directory}: not a directory", path=directory)
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def load_manifest_dir(
    directory: Path,
) -> list[tuple[Path, AnyConnector]]:
    """Every manifest in a directory; all problems are reported together, one per line."""
    loaded: list[tuple[Path, AnyConnector]] = []
    problems: list[str] = []
    seen: dict[str, Path] = {}
    tools = ToolNames()
    checked: set[str] = set()
    for path in manifest_files(directory):
        try:
            manifest = load_manifest_file(path, checked=checked)
        except ManifestError as exc:
            problems.append(str(exc))
            continue
        if manifest.name in seen:
            problems.append(
                f"{path}: field 'name': connector {manifest.name!r} is also defined in "
                f"{seen[manifest.name]} (tool names would clash)"
            )
            continue
        seen[manifest.name] = path
        for index, action_name in enumerate(declared_actions(manifest)):
            where = f"{path}: action {action_name!r} (actions[{index}])"
            clash = tools.claim(f"{manifest.name}__{action_name}", where)
            if clash:
                problems.append(f"{where}: field 'name': {clash}")
        loaded.append((path, manifest))
    if problems:
        raise ManifestError("\n".join(problems), path=directory)
    return loaded


class ToolNames:
    """Tool names already taken, and by whom: `a_` + `_b` and `a` + `__b` are both `a____b`."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}

    def claim(self, tool: str, owner: str) -> str | None:
        """None when `tool` is free (now taken by `owner`); else what to tell the user."""
        if (taken := self.taken(tool)) is not None:
            return taken
        self._owners[tool] = owner
        return None

    def taken(self, tool: str) -> str | None:
        """What to tell the user when `tool` is already taken; None when it is free."""
        if tool in self._owners:
            return f"tool name {tool!r} is also produced by {self._owners[tool]}"
        return None


def missing_env(manifest: AnyConnector, environ: Mapping[str, str]) -> list[str]:
    """Secret variables the manifest needs that are unset or empty (for auth alternatives,
    none when one of them is complete, else the closest one's)."""
    if isinstance(manifest, SqlConnector):
        return [name for name in manifest.env_names() if not environ.get(name)]
    needed = list(manifest.env.values()) if isinstance(manifest, McpConnector) else []
    missing = [name for name in needed if not environ.get(name)]
    return missing + [name for name in auth_missing(manifest.auth, environ) if name not in missing]


def base_url_problem(manifest: AnyConnector, environ: Mapping[str, str]) -> str:
    """Why the `base_url_env` value cannot be used ('' when it can, or is unset).

    Checked when the manifests load, like secrets: a typo such as `localhost:9000` would
    otherwise surface only at the first call, as an error the model cannot fix. A SQL
    connector's `url_env` is checked the same way (a SQLAlchemy URL of its dialect).
    """
    if isinstance(manifest, SqlConnector):
        from connectors.sql.database import url_problem  # SQLAlchemy: only for SQL manifests

        return url_problem(manifest, environ)
    if not isinstance(manifest, HttpConnector) or not manifest.base_url_env:
        return ""
    value = environ.get(manifest.base_url_env)
    if not value or BASE_URL_RE.match(value):
        return ""
    return (
        f"environment variable {manifest.base_url_env} is not an http(s) URL "
        f"(expected scheme://host[:port][/prefix], like base_url)"
    )


def check_env(manifests: Iterable[tuple[Path, AnyConnector]], environ: Mapping[str, str]) -> None:
    """Fail at load time, naming file and variable, when a secret is not in the environment."""
    problems = [
        f"{path}: environment variable {name} is not set (connector {manifest.name!r} needs it)"
        for path, manifest in manifests
        for name in missing_env(manifest, environ)
    ]
    if problems:
        raise ManifestError("\n".join(problems))


def declared_actions(manifest: AnyConnector) -> list[str]:
    """The action names a manifest declares itself (an MCP server's come when it is asked)."""
    if isinstance(manifest, HttpConnector):
        return [action.name for action in manifest.actions]
    if isinstance(manifest, SqlConnector):
        return manifest.action_names()
    return []


def _check_tool_names(manifest: AnyConnector, source: str) -> None:
    seen: set[str] = set()
    for index, name in enumerate(declared_actions(manifest)):
        tool = f"{manifest.name}__{name}"
        where = f"{source}: action {name!r} (actions[{index}]): field 'name'"
        if not TOOL_NAME_RE.match(tool):
            raise ManifestError(
                f"{where}: tool name {tool!r} is not a valid function name "
                f"(letters, digits, _ and -, at most 64 characters)",
                path=source,
            )
        if name in seen:
            raise ManifestError(f"{where}: duplicate action name", path=source)
        seen.add(name)


def describe_validation_error(exc: ValidationError, data: Mapping[str, Any], source: str) -> str:
    """One line per pydantic error: file, action (by name), field path, message (triggers'
    errors read the same: `bot.triggers.loading`)."""
    lines = []
    for error in exc.errors():
        loc = list(error["loc"])
        # discriminated unions add the tag ('http' / 'mcp') as the first element
        if loc and loc[0] in ("http", "mcp", "sql"):
            loc = loc[1:]
        # auth unions add their tag too ('bearer', ...): drop it from the field path
        loc = [part for i, part in enumerate(loc) if not (i > 0 and loc[i - 1] == "auth")]
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc.append("type")  # pydantic puts the error on the union; the culprit is `type`
        where = source
        if len(loc) >= 2 and loc[0] in ("actions", "tools") and isinstance(loc[1], int):
            entries = data.get(loc[0]) or []
            entry = entries[loc[1]] if loc[1] < len(entries) else {}
            label = entry.get("name") or entry.get("match") if isinstance(entry, dict) else None
            kind = "action" if loc[0] == "actions" else "tool rule"
            index = f"{loc[0]}[{loc[1]}]"
            where += f": {kind} {label!r} ({index})" if label else f": {index}"
            loc = loc[2:]
            data_here: Any = entry
        else:
            data_here = data
        rule, loc = rule_location(loc, data_here)
        where += f": {rule}" if rule else ""
        field = ".".join(str(part) for part in loc)
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        elif error["type"] == "value_error":
            message = message.removeprefix("Value error, ")  # pydantic's wording, not ours
        lines.append(f"{where}: field '{field}': {message}" if field else f"{where}: {message}")
    return "\n".join(lines)


def yaml_position(text: str, loc: Sequence[str | int]) -> tuple[int, int] | None:
    """Line and column (1-based) of the field at `loc` in a YAML document (its key; a list
    item's start), for errors a schema finds after loading; a path that stops early (a missing
    field) gives the nearest enclosing place. None when the text does not compose."""
    try:
        node = yaml.compose(text, Loader=YAML_LOADER)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    mark = node.start_mark
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if k.value == part), None)
            if pair is None:
                break
            mark, node = pair[0].start_mark, pair[1]
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
            mark = node.start_mark
        else:
            break
    return mark.line + 1, mark.column + 1


def yaml_line(text: str, loc: Sequence[str | int]) -> str:
    """`:<line>` of the field at `loc` (for `path:line` messages), or '' when unknown."""
    position = yaml_position(text, loc)
    return f":{position[0]}" if position is not None else ""


def yaml_problems(path: Path | str, text: str, exc: ValidationError) -> str:
    """A settings file's schema errors, one line each: `path:line: field: message` (the files
    beside manifests: Feishu apps, workspaces)."""
    lines = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        field = ".".join(str(part) for part in loc)
        message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        lines.append(f"{path}{yaml_line(text, loc)}: {field}: {message}")
    return "\n".join(lines)
