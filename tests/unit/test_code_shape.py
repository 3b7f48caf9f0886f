"""The package's shape: every module says in a docstring what it is for, in
at most MAX_MODULE_DOC_LINES lines (measurements go to BENCHMARKS.md);
every class says in a docstring what it owns; no function or method runs
over MAX_FUNCTION_LINES (split it instead)."""

import ast
import pathlib

from support.helpers import REPO

PACKAGE = pathlib.Path(REPO) / "official_bench"
MAX_FUNCTION_LINES = 100
MAX_MODULE_DOC_LINES = 25


def _trees():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent), ast.parse(
            path.read_text(encoding="utf-8"), str(path))


def test_every_class_has_a_docstring():
    missing = [f"{path}:{node.lineno} {node.name}"
               for path, tree in _trees() for node in ast.walk(tree)
               if isinstance(node, ast.ClassDef)
               and not ast.get_docstring(node)]
    assert not missing, "classes without a docstring saying what they " \
        "own:\n" + "\n".join(missing)


def test_no_function_over_the_limit():
    long = [f"{path}:{node.lineno} {node.name}: "
            f"{node.end_lineno - node.lineno + 1} lines"
            for path, tree in _trees() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + \
        "\n".join(long)


def test_every_module_says_what_it_is_for_briefly():
    bad = []
    for path, tree in _trees():
        doc = ast.get_docstring(tree)
        if path.name == "__main__.py" and doc is None:
            continue  # `python -m` entry: its package's docstring says
        if doc is None:
            bad.append(f"{path}: no docstring")
        elif len(doc.splitlines()) > MAX_MODULE_DOC_LINES:
            bad.append(f"{path}: {len(doc.splitlines())} lines")
    assert not bad, ("module docstrings missing or over "
                     f"{MAX_MODULE_DOC_LINES} lines:\n" + "\n".join(bad))
