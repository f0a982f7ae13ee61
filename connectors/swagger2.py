"""Swagger 2.0 -> OpenAPI 3.0, in process (Kubernetes and the Slack Web API publish 2.0).

No maintained converter is on PyPI, so this one does what the importer needs, following the
mapping the OpenAPI 3.0 specification implies (and swagger2openapi, the reference converter,
applies):
- `host`, `basePath`, `schemes` -> `servers`;
- `definitions` -> `components/schemas`, global `parameters` and `responses` ->
  `components/...`, with every `$ref` rewritten to the new place;
- a `body` parameter -> `requestBody`, one media type per `consumes`; `formData` parameters ->
  a form (or multipart, with a file) `requestBody` whose `encoding` keeps `collectionFormat`;
- other parameters get a `schema`; `collectionFormat` -> `style`/`explode`;
- `produces` -> each response's `content`; `securityDefinitions` -> `securitySchemes` (basic,
  apiKey, the four oauth2 flows);
- schemas: `type: file` -> a binary string, `x-nullable` -> `nullable`.
What has no OpenAPI 3 equivalent (`collectionFormat: tsv`) is said in `notes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.openapi_doc import RefError, pointer, resolve_pointer

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_REF_PREFIXES = (
    ("#/definitions/", "#/components/schemas/"),
    ("#/parameters/", "#/components/parameters/"),
    ("#/responses/", "#/components/responses/"),
)
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"
_JSON = "application/json"
# keywords a Swagger 2.0 non-body parameter shares with a schema
_SCHEMA_KEYS = (
    "type", "format", "items", "default", "enum", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "multipleOf",
)  # fmt: skip
_OAUTH_FLOWS = {
    "implicit": ("implicit", ("authorizationUrl",)),
    "password": ("password", ("tokenUrl",)),
    "application": ("clientCredentials", ("tokenUrl",)),
    "accessCode": ("authorizationCode", ("authorizationUrl", "tokenUrl")),
}


def is_swagger2(doc: Any) -> bool:
    return isinstance(doc, Mapping) and str(doc.get("swagger", "")).startswith("2.")


def swagger_to_openapi(doc: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """The OpenAPI 3.0.3 document equivalent to a Swagger 2.0 one; `notes` gets what was lost."""
    out: dict[str, Any] = {"openapi": "3.0.3", "info": dict(doc.get("info") or {})}
    servers = _servers(doc)
    if servers:
        out["servers"] = servers
    for key in ("tags", "externalDocs", "security"):
        if key in doc:
            out[key] = doc[key]
    out.update({k: v for k, v in doc.items() if str(k).startswith("x-")})
    converter = _Converter(doc, notes)
    out["paths"] = {
        str(path): converter.path_item(str(path), item)
        for path, item in (doc.get("paths") or {}).items()
        if isinstance(item, Mapping)
    }
    components: dict[str, Any] = {}
    definitions = doc.get("definitions")
    if isinstance(definitions, Mapping):
        components["schemas"] = {str(k): schema(v) for k, v in definitions.items()}
    parameters = {
        str(k): converter.parameter(v, pointer("parameters", k))
        for k, v in (doc.get("parameters") or {}).items()
        if isinstance(v, Mapping) and v.get("in") not in ("body", "formData")
    }
    if parameters:
        components["parameters"] = parameters
    responses = {
        str(k): converter.response(v, doc.get("produces"))
        for k, v in (doc.get("responses") or {}).items()
    }
    if responses:
        components["responses"] = responses
    schemes = {
        str(k): _security_scheme(v) for k, v in (doc.get("securityDefinitions") or {}).items()
    }
    if schemes:
        components["securitySchemes"] = schemes
    if components:
        out["components"] = components
    return out


def _servers(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    host = doc.get("host")
    base = str(doc.get("basePath") or "").rstrip("/")
    if base and not base.startswith("/"):
        base = "/" + base
    if not isinstance(host, str) or not host:
        return [{"url": base}] if base else []
    schemes = [s for s in doc.get("schemes") or ["https"] if s in ("https", "http")]
    return [{"url": f"{scheme}://{host}{base}"} for scheme in schemes or ["https"]]


def schema(node: Any) -> Any:
    """A Swagger 2.0 schema in OpenAPI 3.0 terms (recursively)."""
    if isinstance(node, list):
        return [schema(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = rewrite_ref(value)
        elif key in ("properties", "definitions") and isinstance(value, Mapping):
            out[key] = {str(k): schema(v) for k, v in value.items()}
        elif key in ("example", "enum", "default") or str(key).startswith("x-"):
            out[key] = value
        elif key == "discriminator" and isinstance(value, str):
            out[key] = {"propertyName": value}
        else:
            out[key] = schema(value)
    if out.get("type") == "file":
        out["type"], out["format"] = "string", "binary"
    if node.get("x-nullable") is True:
        out["nullable"] = True
    return out


def rewrite_ref(ref: str) -> str:
    for old, new in _REF_PREFIXES:
        if ref.startswith(old):
            return new + ref[len(old) :]
    return ref


def _security_scheme(scheme: Any) -> dict[str, Any]:
    if not isinstance(scheme, Mapping):
        return {}
    kind = scheme.get("type")
    out: dict[str, Any] = {}
    if kind == "basic":
        out = {"type": "http", "scheme": "basic"}
    elif kind == "apiKey":
        out = {"type": "apiKey", "name": scheme.get("name"), "in": scheme.get("in")}
    elif kind == "oauth2":
        flow, urls = _OAUTH_FLOWS.get(str(scheme.get("flow")), ("implicit", ()))
        body = {url: scheme[url] for url in urls if url in scheme}
        out = {"type": "oauth2", "flows": {flow: {**body, "scopes": scheme.get("scopes") or {}}}}
    if isinstance(scheme.get("description"), str):
        out["description"] = scheme["description"]
    return out


class _Converter:
    """Paths, parameters and responses of one document (global `consumes`/`produces`)."""

    def __init__(self, doc: Mapping[str, Any], notes: list[str]) -> None:
        self.doc = doc
        self.notes = notes

    def path_item(self, path: str, item: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in item.items() if str(k).startswith("x-")}
        if "$ref" in item:
            out["$ref"] = item["$ref"]
        shared = [p for p in item.get("parameters") or [] if isinstance(p, Mapping)]
        kept = [
            self.parameter(p, pointer("paths", path, "parameters", i))
            for i, p in enumerate(shared)
            if self._kind(p) not in ("body", "formData")
        ]
        if kept:
            out["parameters"] = kept
        for method in METHODS:
            op = item.get(method)
            if isinstance(op, Mapping):
                out[method] = self.operation(path, method, op, shared)
        return out

    def operation(
        self, path: str, method: str, op: Mapping[str, Any], shared: list[Mapping[str, Any]]
    ) -> dict[str, Any]:
        where = pointer("paths", path, method)
        keep = ("operationId", "summary", "description", "tags", "deprecated", "security")
        out: dict[str, Any] = {k: op[k] for k in keep if k in op}
        out.update({k: v for k, v in op.items() if str(k).startswith("x-")})
        own = [p for p in op.get("parameters") or [] if isinstance(p, Mapping)]
        params: list[Any] = []
        bodies: dict[tuple[str, str], Mapping[str, Any]] = {}
        for listed, base in ((shared, pointer("paths", path, "parameters")), (own, where)):
            for index, raw in enumerate(listed):
                param = self._target(raw)
                kind = self._kind(raw)
                if kind in ("body", "formData") and param is not None:
                    bodies[(kind, str(param.get("name")))] = param  # the operation's wins
                elif listed is own:
                    params.append(self.parameter(raw, f"{base}/parameters/{index}"))
        if params:
            out["parameters"] = params
        consumes = _media(op.get("consumes"), self.doc.get("consumes"))
        body = self._request_body(bodies, consumes, where)
        if body is not None:
            out["requestBody"] = body
        produces = op.get("produces") if "produces" in op else self.doc.get("produces")
        out["responses"] = {
            str(code): self.response(response, produces)
            for code, response in (op.get("responses") or {"default": {}}).items()
        }
        return out

    def parameter(self, param: Mapping[str, Any], where: str) -> dict[str, Any]:
        """A non-body parameter (or a `$ref` to one) in OpenAPI 3 form."""
        if isinstance(param.get("$ref"), str):
            return {"$ref": rewrite_ref(param["$ref"])}
        keep = ("name", "in", "description", "required", "deprecated", "allowEmptyValue")
        out: dict[str, Any] = {k: param[k] for k in keep if k in param}
        out.update({k: v for k, v in param.items() if str(k).startswith("x-")})
        out["schema"] = _param_schema(param)
        if param.get("type") == "array":
            out.update(self._style(param, str(param.get("in")), where))
        return out

    def response(self, response: Any, produces: Any) -> dict[str, Any]:
        if not isinstance(response, Mapping):
            return {"description": ""}
        if isinstance(response.get("$ref"), str):
            return {"$ref": rewrite_ref(response["$ref"])}
        out: dict[str, Any] = {"description": str(response.get("description") or "")}
        if "schema" in response:
            body = schema(response["schema"])
            out["content"] = {media: {"schema": body} for media in _media(produces, None)}
        headers = response.get("headers")
        if isinstance(headers, Mapping):
            out["headers"] = {
                str(name): {
                    **({"description": h["description"]} if "description" in h else {}),
                    "schema": _param_schema(h),
                }
                for name, h in headers.items()
                if isinstance(h, Mapping)
            }
        return out

    # --- request bodies --------------------------------------------------------------------

    def _request_body(
        self,
        bodies: Mapping[tuple[str, str], Mapping[str, Any]],
        consumes: list[str],
        where: str,
    ) -> dict[str, Any] | None:
        body = next((p for (kind, _), p in bodies.items() if kind == "body"), None)
        if body is not None:
            out: dict[str, Any] = {
                "content": {
                    media: {"schema": schema(body.get("schema") or {})} for media in consumes
                }
            }
            if isinstance(body.get("description"), str):
                out["description"] = body["description"]
            if body.get("required") is True:
                out["required"] = True
            return out
        fields = [p for (kind, _), p in bodies.items() if kind == "formData"]
        if not fields:
            return None
        properties: dict[str, Any] = {}
        required: list[str] = []
        encoding: dict[str, Any] = {}
        for field in fields:
            name = str(field.get("name"))
            prop = _param_schema(field)
            if isinstance(field.get("description"), str):
                prop["description"] = field["description"]
            properties[name] = prop
            if field.get("required") is True:
                required.append(name)
            if field.get("type") == "array":
                style = self._style(field, "formData", f"{where}/parameters/{name}")
                if style:
                    encoding[name] = style
        form: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            form["required"] = required
        has_file = any(f.get("type") == "file" for f in fields)
        wanted = [m for m in consumes if m.split(";")[0].strip() in (_FORM, _MULTIPART)]
        media_types = wanted or [_MULTIPART if has_file else _FORM]
        content = {
            media: {"schema": form, **({"encoding": encoding} if encoding else {})}
            for media in media_types
        }
        return {"content": content, **({"required": True} if required else {})}

    def _style(self, param: Mapping[str, Any], location: str, where: str) -> dict[str, Any]:
        """`collectionFormat` as OpenAPI 3 `style` and `explode`."""
        fmt = str(param.get("collectionFormat") or "csv")
        in_path = location in ("path", "header")
        if fmt == "multi" and not in_path:
            return {"style": "form", "explode": True}
        if fmt == "ssv" and not in_path:
            return {"style": "spaceDelimited", "explode": False}
        if fmt == "pipes" and not in_path:
            return {"style": "pipeDelimited", "explode": False}
        if fmt not in ("csv", "multi", "ssv", "pipes", "tsv"):
            self.notes.append(f"{where}: unknown collectionFormat {fmt!r}; sent comma-separated")
        elif fmt != "csv":
            self.notes.append(
                f"{where}: collectionFormat {fmt!r} has no OpenAPI 3 equivalent here; "
                "sent comma-separated"
            )
        return (
            {"style": "simple", "explode": False}
            if in_path
            else {
                "style": "form",
                "explode": False,
            }
        )

    def _target(self, raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """A parameter, its `$ref` followed (in the Swagger document)."""
        if not isinstance(raw.get("$ref"), str):
            return raw
        try:
            found = resolve_pointer(self.doc, raw["$ref"])
        except RefError:
            return None  # left as a reference: the import says it does not resolve
        return found if isinstance(found, Mapping) else None

    def _kind(self, raw: Mapping[str, Any]) -> str:
        param = self._target(raw)
        return str(param.get("in")) if param is not None else ""


def _param_schema(param: Mapping[str, Any]) -> dict[str, Any]:
    """The schema of a non-body parameter, form field or header: its schema keywords
    (`uniqueItems` only on an array: Kubernetes puts it on every parameter)."""
    keys = [k for k in _SCHEMA_KEYS if k in param]
    if param.get("type") != "array":
        keys = [k for k in keys if k != "uniqueItems"]
    return schema({k: param[k] for k in keys})


def _media(own: Any, default: Any) -> list[str]:
    listed = own if isinstance(own, list) and own else default
    kept = [str(m) for m in listed or [] if isinstance(m, str)]
    return kept or [_JSON]
