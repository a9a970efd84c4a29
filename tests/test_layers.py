"""castlike's layers point one way, and no module-level import makes a cycle.

The layers, bottom up: the spec (with ``errors``), which imports nothing else of castlike; the
engines (the array engine and its integer routines, the native kernels' routes); the
backends; the string rules and the frontend; the tools on top (the CLI, parity, conformance,
compare, ONNX interop, testing).  Read from the sources with :mod:`ast`: every ``import`` at a
module's top level counts, ``if TYPE_CHECKING:`` blocks included; imports inside functions
(loaded only when called) do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "castlike"

#: Each module's layer, by the longest matching name prefix.
LAYERS = {
    "castlike.errors": 0,
    "castlike.spec": 0,
    "castlike._exact": 1,
    "castlike._engine": 1,
    "castlike._native": 1,
    "castlike._adapter": 0,
    "castlike.backends": 2,
    "castlike._fastpath": 2,
    "castlike.strings": 3,
    "castlike._frontend": 4,
    "castlike": 4,
    "castlike.testing": 5,
    "castlike.onnx_data": 5,
    "castlike.onnx": 5,
    "castlike.parity": 5,
    "castlike._parity_render": 5,
    "castlike.conformance": 5,
    "castlike.compare": 5,
    "castlike.cli": 6,
    "castlike.__main__": 6,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool, modules: set[str]) -> list[str]:
    """The modules a ``from ... import`` loads: the submodules it names, else the module it
    imports names from (a package's ``__init__`` loads with any of its submodules, so it is
    no edge of its own there)."""
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
    return submodules or [base]


def _top_level_imports(path: Path, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    module = _module_name(path)
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.update(_resolve(module, node, path.name == "__init__.py", modules))
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = _top_level_imports(path, set(modules))
        targets = {t for t in imported if t in modules and t != name}
        graph[name] = targets
    return graph


def _layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def test_no_import_cycle() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_layers_point_one_way() -> None:
    wrong = [
        f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)})"
        for a, targets in sorted(_graph().items())
        for b in sorted(targets)
        if _layer(b) > _layer(a)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_spec_imports_only_the_spec_and_errors() -> None:
    for a, targets in _graph().items():
        if a.startswith("castlike.spec"):
            others = [t for t in targets if not t.startswith(("castlike.spec", "castlike.errors"))]
            assert not others, f"{a} imports {others}"


def test_a_backend_imports_no_other_backend() -> None:
    """A backend is its primitives and a registration: it needs no other backend, but for
    Dask, whose blocks are NumPy arrays cast by the NumPy backend.  What several share (the
    NumPy dtypes of host conversions, torch's compile support) lives in ``_``-modules."""
    backends = {"numpy", "torch", "jax", "dask", "array_api"}
    allowed = {("dask", "numpy")}
    wrong = []
    for a, targets in _graph().items():
        head, _, name = a.rpartition(".")
        if head != "castlike.backends" or name not in backends:
            continue
        for b in targets:
            other = b.rpartition(".")[2]
            foreign = b.startswith("castlike.backends.") and other in backends - {name}
            if foreign and (name, other) not in allowed:
                wrong.append(f"{a} imports {b}")
    assert not wrong, "\n".join(wrong)


def test_tools_do_not_lean_on_testing() -> None:
    """The ONNX data reader is a tool of its own, not built on the test helpers."""
    assert "castlike.testing" not in _graph()["castlike.onnx_data"]
