"""The JavaScript that runs in pages lives in webfetch/js/ (page_scripts.py), never in Python strings."""

import ast
import json
import re
from pathlib import Path

from webfetch import page_scripts

ROOT = Path(__file__).resolve().parent.parent
# what JavaScript has and the daemon's prose and other strings do not
JS = re.compile(r"=>|\bfunction\s*\w*\s*\(|\b(const|let)\s+\w+\s*=|\bdocument\.\w|\bthis\.\w|\bglobalThis\b")


def test_no_python_string_in_webfetch_holds_more_than_a_line_of_javascript():
    found = []
    for path in sorted((ROOT / "webfetch").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value.strip():
                if JS.search(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"JavaScript in Python strings (move it to webfetch/js/): {found}"


def test_every_page_script_is_one_function_called_with_its_arguments_as_json():
    for path in sorted((ROOT / "webfetch" / "js").glob("*.js")):
        script = page_scripts.load(path.stem)
        assert re.search(r"^function \w+\(", script.source, re.M), path.name
        assert script.source.endswith("}"), path.name
    point, on_ref = page_scripts.load("point"), page_scripts.load("on_ref")
    quoted = json.dumps('a"b')
    assert page_scripts.load("settled").call(2000, 50, 'a"b').endswith(f"\n)(2000, 50, {quoted})")
    assert on_ref.call(point) == f"({on_ref.source}\n)(({point.source}\n))"
    assert page_scripts.invoke("__wf.get", "e1") == '__wf.get("e1")'
