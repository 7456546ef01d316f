"""What the sub-agent is asked for a fetch with a `schema`: JSON that validates against it, taken from the page
and never invented, and the retry that shows it why its first reply did not validate. The checks themselves
are parse/json_answer.py's; the pipeline (fetch/pipeline.py) runs the turns."""

from __future__ import annotations

import json
from typing import Any

# The part of a failed reply shown again in the retry: enough to see the mistake, not a second page.
REPLY_SHOWN_CHARS = 4000


def data_task(schema: dict[str, Any], prompt: str | None, part: tuple[int, int] | None = None) -> str:
    """The task for a schema answer; `part` (i, n): the page was split, this is part i of n."""
    where = "this page"
    if part is not None:
        where = (f"this part ({part[0]} of {part[1]}) of a page too long to read at once; the answers for all "
                 f"parts are merged, so give only what this part holds")
    ask = f"\n\nWhat to extract: {prompt}" if prompt else ""
    return (f"Extract data from {where} as one JSON value that validates against this JSON Schema (draft "
            f"2020-12):\n<json_schema>\n{json.dumps(schema, ensure_ascii=False, indent=1)}\n</json_schema>{ask}\n\n"
            "Take every value from the page as it has it. A value the page does not contain is null, or left "
            "out when the schema does not require it: never invent, estimate or fill in a value the page does "
            "not give, even where the schema asks for one (a reply that does not validate is reported as such, "
            "which is better than a made-up value). Reply with the JSON value alone: no prose, no code fence.")


def retry_task(task: str, reply: str, errors: list[str]) -> str:
    """The same task again, with the reply that failed and why, for the one retry."""
    shown = reply if len(reply) <= REPLY_SHOWN_CHARS else reply[:REPLY_SHOWN_CHARS] + "…(cut)"
    why = "\n".join(f"- {e}" for e in errors)
    return (f"{task}\n\nYour previous reply did not validate against the schema:\n<previous_reply>\n{shown}\n"
            f"</previous_reply>\nWhy:\n{why}\nReply again with the corrected JSON value alone.")
