"""The bench scripts import each other's names (`from _deployment import Meter`); a rework of one must not leave another
importing a name that is gone. `make bench` runs them, the suite does not (they print figures), so this is checked
on their source."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def test_every_name_a_bench_script_imports_from_another_exists_there() -> None:
    trees = {path.stem: ast.parse(path.read_text(), str(path)) for path in sorted(BENCH.glob("*.py"))}
    defined = {module: top_level_names(tree) for module, tree in trees.items()}
    imported = [
        (module, node.module, alias.name)
        for module, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in trees
        for alias in node.names
        if alias.name != "*"
    ]
    # An empty list would pass the check below whatever the scripts hold (a moved folder, a changed import style).
    assert imported, f"no script under {BENCH} imports a name from another"
    missing = [f"bench/{module}.py imports {name} from {source}" for module, source, name in imported if name not in defined[source]]
    assert missing == []
