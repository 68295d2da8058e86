"""The product stays readable in pieces (issue 56): no module over 800 lines, no function over
80, and a README a user reads in one sitting (<= 12,000 bytes)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = [*sorted((ROOT / "dflash").rglob("*.py")), ROOT / "app.py"]


def test_modules_and_functions_stay_short():
    long_modules, long_functions = [], []
    for path in PRODUCT:
        text = path.read_text()
        name = path.relative_to(ROOT)
        if len(text.splitlines()) > 800:
            long_modules.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long_functions.append(f"{name}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not long_modules and not long_functions, long_modules + long_functions


def test_the_readme_reads_in_one_sitting():
    assert len((ROOT / "README.md").read_bytes()) <= 12_000  # details go to docs/
