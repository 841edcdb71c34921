"""Keep modules and functions small enough to read whole (CONTRIBUTING.md, "Size").

A module over MODULE_LINES lines fails. A function over FUNCTION_LINES lines
fails unless its docstring says why it is long, in a sentence starting
"Long because". Run by .ci/run; prints one line per problem, exits 1 if any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LINES = 400
FUNCTION_LINES = 60
REASON = "Long because"


def problems(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > MODULE_LINES:
            found.append(f"{path}: {lines} lines (at most {MODULE_LINES}): split it")
        for node in ast.walk(ast.parse(text, str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            doc = ast.get_docstring(node) or ""
            if length > FUNCTION_LINES and REASON not in doc:
                found.append(
                    f"{path}:{node.lineno}: {node.name}() is {length} lines (at most "
                    f"{FUNCTION_LINES} unless its docstring says {REASON!r} ...)"
                )
    return found


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "sessionstore")
    found = problems(root)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
