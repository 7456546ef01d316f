"""The JavaScript that runs inside pages, kept as checked source: one function per file in webfetch/js/,
checked by tsc (`checkJs`, strict) in bin/check, instead of Python strings that no linter or type checker
reads and that options were substituted into.

Each file is one function declaration that depends on nothing of ours but the page globals another file
installs (`__wf`, `__webfetchSettle`: js/globals.d.ts types them). CDP takes source text, not functions:
`Runtime.callFunctionOn` a function's source (`Script.source`), `Runtime.evaluate` and
`Page.addScriptToEvaluateOnNewDocument` an expression, which `Script.call` writes as the function called
on its arguments, given as JSON (or as functions: other Scripts). Nothing is ever pasted into a source."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any


@dataclass(frozen=True)
class Script:
    name: str
    source: str  # `function name(...) {...}`: a declaration, and in parentheses an expression

    def call(self, *args: Any) -> str:
        """The expression that calls the function on `args` (JSON values, or Scripts passed as functions)."""
        return f"{_function(self)}({', '.join(_argument(a) for a in args)})"


@cache
def load(name: str) -> Script:
    """webfetch/js/`name`.js, read once (package data)."""
    return Script(name, files(__package__ or "webfetch").joinpath("js", f"{name}.js").read_text("utf-8").strip())


def invoke(function: str, *args: Any) -> str:
    """`function(args as JSON)`: a call of a function a script installed in the page (`__wf.get`)."""
    return f"{function}({', '.join(json.dumps(a) for a in args)})"


def _function(script: Script) -> str:
    # the newline ends a line comment the file may end with
    return f"({script.source}\n)"


def _argument(value: Any) -> str:
    return _function(value) if isinstance(value, Script) else json.dumps(value)
