"""The tool contract: each tool's name, title, description, input schema and annotations, read from
pi_extension/tools.json, the one file the pi extension reads too.

It lives beside the pi extension's modules (tools.ts reads it) because `webfetch pi install` copies that
directory into pi's extensions directory, and the extension must find it there; Python reads it from the
package. So the model reads one wording whichever client it sits in, and the browse actions are listed once
for every front end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from .installation import package_file

CONTRACT_FILE = package_file("pi_extension", "tools.json")


@dataclass(frozen=True)
class ToolContract:
    """One tool as every front end offers it. `annotations` and `input_schema` are in MCP's wire form."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]
    without_subagent: ToolContract | None = None  # the tool as listed when the daemon has no sub-agent


def load(text: str) -> dict[str, ToolContract]:
    """The contract's tools by name, in the file's order."""
    tools: dict[str, ToolContract] = {}
    for t in json.loads(text)["tools"]:
        tool = ToolContract(name=t["name"], title=t["title"], description=" ".join(t["description"]),
                            input_schema=t["inputSchema"], annotations=t["annotations"])
        if "withoutSubagent" in t:
            tool = replace(tool, without_subagent=_without(tool, t["withoutSubagent"]))
        tools[t["name"]] = tool
    return tools


def _without(tool: ToolContract, variant: dict[str, Any]) -> ToolContract:
    """The tool with the variant's description and without the properties it drops."""
    schema = dict(tool.input_schema)
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in variant["drop"]}
    return replace(tool, description=" ".join(variant["description"]), input_schema=schema)


TOOLS = load(CONTRACT_FILE.read_text(encoding="utf-8"))
FETCH = TOOLS["web_fetch"]
SEARCH = TOOLS["web_search"]
BROWSER = TOOLS["agent_browser"]
# What the browser tool can do, in the order the model reads them (the CLI's `webfetch browse` takes them too).
BROWSER_ACTIONS: tuple[str, ...] = tuple(BROWSER.input_schema["properties"]["action"]["enum"])
