"""A tool call's arguments checked against the tool's own input schema, with messages in the tool's terms.

MCP clients pass what the model wrote, and the SDK's low-level server checks nothing: without this a null
`url` reached the daemon and came back as its decoder's `Expected str, got null - at $.url`, the string
"false" for `raw` read as true, and an unknown argument was dropped without a word. The schemas in
tools.json use a small part of JSON Schema (object properties, required, additionalProperties false, the
scalar types, arrays of strings, enum, minimum, maximum); KEYWORDS names it, and
tests/test_tool_contract.py checks that the contract uses nothing else, so no rule is silently ignored.
"""

from __future__ import annotations

import json
from typing import Any

KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "minimum",
                      "maximum", "description"})

_TYPES = {"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
          "array": "a list", "object": "an object"}


class BadArguments(ValueError):
    """The arguments do not fit the schema: the message says which and what the tool takes instead."""


def check(tool: str, schema: dict[str, Any], args: dict[str, Any]) -> None:
    """Raise BadArguments naming the first argument that does not fit `schema`; an argument given as null
    counts as not given (models write null for "no value")."""
    props: dict[str, Any] = schema.get("properties", {})
    unknown = sorted(k for k in args if k not in props)
    if unknown and schema.get("additionalProperties") is False:
        raise BadArguments(f"{tool} takes no argument {', '.join(map(repr, unknown))}; its arguments are "
                           f"{', '.join(props)}")
    for name in schema.get("required", []):
        if args.get(name) is None:
            raise BadArguments(f"{tool} needs `{name}`: {props[name].get('description', '')}".rstrip(": "))
    for name, value in args.items():
        if value is not None and name in props:
            problem = _value_problem(props[name], value)
            if problem:
                raise BadArguments(f"{tool}: `{name}` must be {problem}, not {_shown(value)}")


def _value_problem(prop: dict[str, Any], value: Any) -> str | None:
    """What `value` must be instead, or None when it fits."""
    kind = prop.get("type")
    if not _is(kind, value):
        return _TYPES.get(kind or "", str(kind))
    if kind == "array":
        for item in value:
            inner = _value_problem(prop.get("items", {}), item)
            if inner:
                return f"a list of {inner.removeprefix('a ').removeprefix('an ')}s"
    if "enum" in prop and value not in prop["enum"]:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "minimum" in prop and value < prop["minimum"]:
        return f"at least {prop['minimum']}"
    if "maximum" in prop and value > prop["maximum"]:
        return f"at most {prop['maximum']}"
    return None


def _is(kind: str | None, value: Any) -> bool:
    if kind is None:
        return True
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):  # JSON's true is no number, though Python's bool is an int
        return False
    if kind == "integer":
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, int | float)
    return isinstance(value, {"string": str, "array": list, "object": dict}[kind])


def _shown(value: Any) -> str:
    """The value as the model wrote it (JSON), a long one cut."""
    text = json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        text = f"the string {text}"
    return text if len(text) <= 80 else text[:77] + "…"
