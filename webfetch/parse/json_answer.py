"""A fetch's `schema` (JSON Schema, draft 2020-12) and the sub-agent's JSON answer to it: the schema checked
when the request comes (bounded: its bytes, its nesting with its `$ref`s followed, no `$ref` cycle, only refs
into itself), and a reply parsed and validated with `jsonschema`, in a parser worker process: a schema's
`pattern` runs Python's `re` on the model's output, which can backtrack for minutes holding the GIL, so like
`find`'s regular expressions it runs where the request's deadline can kill it (Extractor.json_answer).

Pure functions; the retries, the parts of a large page and the merge's notes are the pipeline's
(fetch/pipeline.py)."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from ..errors import BadRequest

MAX_SCHEMA_BYTES = 64 * 1024   # a schema, encoded as JSON
MAX_SCHEMA_DEPTH = 32          # objects and arrays nested, its `$ref`s followed
# A reply longer than this is refused unparsed: data drawn from one page, not a copy of it. Measured on
# length (characters) before any parse, so a hostile model's endless reply costs no more than this.
MAX_REPLY_CHARS = 256 * 1024
ERRORS_SHOWN = 5               # validation errors named in a retry's prompt and in schema_mismatch
ERRORS_SCANNED = 50            # errors collected before the first ERRORS_SHOWN are picked (by place)
MESSAGE_CHARS = 200            # one error's message (jsonschema's quote the offending value)
DRAFT = "https://json-schema.org/draft/2020-12/schema"
_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_META = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)


def checked(schema: dict[str, Any] | None) -> None:
    """Refuses a schema that is not one webfetch takes: BadRequest naming where (`$.schema…`) and why."""
    if schema is None:
        return
    size = len(json.dumps(schema, ensure_ascii=False).encode())
    if size > MAX_SCHEMA_BYTES:
        raise BadRequest(f"`schema` is {size} bytes of JSON; at most {MAX_SCHEMA_BYTES} are taken: describe "
                         f"only the fields you need - at `$.schema`")
    _check_depth(schema)  # before the metaschema walks it
    declared = schema.get("$schema")
    if declared is not None and str(declared).rstrip("#") != DRAFT:
        raise BadRequest(f"`$schema` is {json.dumps(declared)[:200]}; webfetch validates draft 2020-12: drop "
                         f"`$schema` or set it to {DRAFT!r} - at `$.schema.$schema`")
    error = best_match(_META.iter_errors(schema))
    if error is not None:
        raise BadRequest(f"`schema` is not a valid JSON Schema (draft 2020-12): {_short(error.message)} - at "
                         f"`{_at(error.absolute_path)}`")
    _check_refs(schema)


def _at(path: Any) -> str:
    """A place in the request's schema as a JSON path (`$.schema.properties.price`)."""
    out = "$.schema"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if _NAME.match(str(part))
                                                          else f"[{json.dumps(str(part))}]")
    return out


def _short(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 1] + "…"


def _children(node: Any) -> list[tuple[str | int, Any]]:
    if isinstance(node, dict):
        return list(node.items())
    if isinstance(node, list):
        return list(enumerate(node))
    return []


def _check_depth(schema: dict[str, Any]) -> None:
    """Nesting beyond MAX_SCHEMA_DEPTH, found without recursion (the request's JSON may nest thousands deep)."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(schema, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise BadRequest(f"`schema` nests deeper than {MAX_SCHEMA_DEPTH} objects and arrays; flatten it - at "
                             f"`{_at(path)}`")
        stack.extend((child, depth + 1, (*path, key)) for key, child in _children(node)
                     if isinstance(child, (dict, list)))


def _check_refs(schema: dict[str, Any]) -> None:
    """Every `$ref` points into the schema itself (`#` or `#/…`: nothing is ever fetched), no `$ref` leads
    back to itself (a cycle would let validation recurse without end), and the schema with its `$ref`s
    followed nests at most MAX_SCHEMA_DEPTH deep."""
    below: dict[str, int] = {}  # a ref's target: how deep it nests, refs followed (each target walked once)

    def too_deep(path: tuple[str | int, ...]) -> BadRequest:
        return BadRequest(f"`schema` with its `$ref`s followed nests deeper than {MAX_SCHEMA_DEPTH} objects and "
                          f"arrays; flatten it - at `{_at(path)}`")

    def depth(node: Any, path: tuple[str | int, ...], chain: tuple[str, ...], level: int) -> int:
        """How deep `node` nests, refs followed; `level`: how deep it is itself (the root is 1)."""
        if level > MAX_SCHEMA_DEPTH:
            raise too_deep(path)
        deepest = 0
        for key, child in _children(node):
            if key in ("$dynamicRef", "$recursiveRef") or (key == "$id" and path):
                raise BadRequest(f"`{key}` is not taken in a fetch's schema: use `$ref` to `#/$defs/NAME` - at "
                                 f"`{_at((*path, key))}`")
            if key == "$ref" and isinstance(child, str) and isinstance(node, dict):
                deepest = max(deepest, through(child, (*path, key), chain, level + 1))
            elif isinstance(child, (dict, list)):
                deepest = max(deepest, depth(child, (*path, key), chain, level + 1))
        return deepest + 1

    def through(ref: str, path: tuple[str | int, ...], chain: tuple[str, ...], level: int) -> int:
        if ref in chain:
            raise BadRequest(f"`$ref` {json.dumps(ref)} leads back to a schema it is part of (a cycle); webfetch "
                             f"takes schemas without recursion: write out the levels you need - at `{_at(path)}`")
        if ref not in below:
            below[ref] = depth(_target(schema, ref, path), _pointer_path(ref), (*chain, ref), level)
        elif level - 1 + below[ref] > MAX_SCHEMA_DEPTH:
            raise too_deep(path)
        return below[ref]

    depth(schema, (), (), 1)


def _pointer_path(ref: str) -> tuple[str | int, ...]:
    parts = unquote(ref[1:]).split("/")[1:] if ref.startswith("#/") else []
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in parts)


def _target(schema: dict[str, Any], ref: str, path: tuple[str | int, ...]) -> Any:
    if ref != "#" and not ref.startswith("#/"):
        raise BadRequest(f"`$ref` {json.dumps(ref)[:200]} points outside the schema; only refs into it are taken "
                         f"(`#` or `#/$defs/NAME`), nothing is fetched - at `{_at(path)}`")
    node: Any = schema
    for part in _pointer_path(ref):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and str(part).isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise BadRequest(f"`$ref` {json.dumps(ref)[:200]} points at nothing in the schema - at `{_at(path)}`")
    return node


@dataclass(frozen=True)
class Reply:
    """A model's reply read against the schema: its data when it validates, else why not."""

    data: Any = None
    errors: list[str] = field(default_factory=list)  # empty: `data` validates

    @property
    def valid(self) -> bool:
        return not self.errors


def read_reply(text: str, schema: dict[str, Any]) -> Reply:
    """The reply's JSON value validated against `schema` (run in a parser worker: see the module's docstring).
    A reply wrapped in a markdown code fence is taken from inside it: models add one against instructions."""
    if len(text) > MAX_REPLY_CHARS:
        return Reply(errors=[f"the reply is {len(text)} characters; at most {MAX_REPLY_CHARS} are read"])
    body = _unfenced(text.strip())
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        return Reply(errors=[f"the reply is not JSON ({e.msg} at line {e.lineno} column {e.colno}); it must be "
                             f"one JSON value and nothing else"])
    except RecursionError:
        return Reply(errors=["the reply's JSON nests too deeply to read"])
    return Reply(data=data, errors=validation_errors(data, schema))


def validation_errors(data: Any, schema: dict[str, Any]) -> list[str]:
    """The first ERRORS_SHOWN ways `data` fails `schema`, in document order, each `at $.path: why`."""
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    try:
        found: list[ValidationError] = list(itertools.islice(validator.iter_errors(data), ERRORS_SCANNED))
    except RecursionError:
        return ["the reply's JSON nests too deeply to validate"]
    found.sort(key=lambda e: [str(p) for p in e.absolute_path])
    return [f"at {e.json_path}: {_short(e.message)}" for e in found[:ERRORS_SHOWN]]


def _unfenced(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and "\n" in text:
        return text[text.index("\n") + 1:-3].strip()
    return text


@dataclass
class Merged:
    """Parts' answers as one value, and where they disagreed (a scalar the first part that had one won)."""

    data: Any
    conflicts: list[str] = field(default_factory=list)


def merge_parts(parts: list[Any], schema: dict[str, Any]) -> tuple[Merged, list[str]]:
    """The parts' answers merged, and how the merge fails `schema` (empty: it validates); in a worker."""
    merged = merge(parts)
    return merged, validation_errors(merged.data, schema)


def merge(parts: list[Any]) -> Merged:
    """The answers for a page's parts as one: objects merged key by key, arrays joined in page order (a
    value equal to one already there dropped), for anything else the first non-null value, a different
    non-null value later noted as a conflict at its path. Deterministic, so what a merge did can be said."""
    merged = Merged(None)
    for part in parts:
        merged.data = _merge(merged.data, part, "$", merged.conflicts)
    return merged


def _merge(a: Any, b: Any, path: str, conflicts: list[str]) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        joined = dict(a)
        for key, value in b.items():
            joined[key] = _merge(joined.get(key), value, f"{path}.{key}", conflicts)
        return joined
    if isinstance(a, list) and isinstance(b, list):
        seen = {_canonical(x) for x in a}
        out = list(a)
        for x in b:
            if _canonical(x) not in seen:
                seen.add(_canonical(x))
                out.append(x)
        return out
    if a != b and path not in conflicts:
        conflicts.append(path)
    return a


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
