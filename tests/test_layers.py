"""The package's shape: imports only go down the layers, and no two modules import each other in a circle.

Every `import` of every module counts, at module level, inside functions and under `TYPE_CHECKING`
alike: a circle that only type checkers see still ties two layers together.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "xun"

# What each layer may import, bottom to top. The offline server sits beside compaction: a model server
# that knows the message formats and nothing of the agent, which `agent.launch` may start.
MAY_IMPORT: dict[str, set[str]] = {
    "base": set(),
    "context": {"base"},
    "compact": {"base", "context"},
    "offline": {"base", "context"},
    "agent": {"base", "context", "compact", "offline"},
    "tui": {"base", "context", "compact", "agent"},
    "cli": {"base", "context", "compact", "offline", "agent", "tui"},
}
# The public faces at the top of the package: the seed's import paths and `python -m xun`.
FACES = {"xun", "xun.__main__", "xun.conversation", "xun.conversation_message"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str) -> set[str]:
    """The xun modules `name` imports (a `from pkg import mod` of a submodule counts as that module)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                found.add(submodule if submodule in MODULES else module)
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in MAY_IMPORT else None


def test_every_module_belongs_to_a_layer_or_is_a_public_face() -> None:
    stray = [name for name in MODULES if _layer(name) is None and name not in FACES]
    assert stray == [], f"modules outside the layer folders: {stray}"


def test_only_the_interfaces_import_textual() -> None:
    """The engine (base, context, compact, agent) and the offline server never import Textual: the app
    turns the engine's events into messages, the engine knows nothing of it."""
    found = []
    for name, path in MODULES.items():
        if _layer(name) in ("tui", "cli") or name in FACES:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [f"{name} imports {m}" for m in modules if m.split(".")[0] in ("textual", "textual_serve")]
    assert found == []


def test_imports_only_go_down_the_layers() -> None:
    upward = []
    for name, imported in GRAPH.items():
        layer = _layer(name)
        if layer is None:
            continue
        for target in imported:
            if target == "xun":  # the root package: `__version__`, and lazy public names
                continue
            other = _layer(target)
            if other != layer and other not in MAY_IMPORT[layer]:
                upward.append(f"{name} imports {target}")
    assert upward == [], "imports against the layers:\n" + "\n".join(sorted(upward))


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def test_no_module_imports_itself_through_a_circle() -> None:
    graph = {name: {t for t in targets if t not in FACES} for name, targets in GRAPH.items()}
    assert _circles(graph) == []


def test_the_checks_see_a_circle_and_an_upward_import() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert "compact" not in MAY_IMPORT["context"] and "agent" not in MAY_IMPORT["compact"]


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("xun", ["Conversation", "Agent", "AutoCompactor", "CompactorAbstract"]),
        ("xun.compact", ["compact_conversation", "ESCALATION_RATIO", "AutoCompactor", "SummaryCompactResult"]),
        ("xun.conversation_message", ["SystemPrompt", "UserMessage", "RawOpenAIMessage", "message_from_json"]),
        ("xun.conversation", ["Conversation"]),
    ],
)
def test_the_seed_names_stay_where_the_seed_puts_them(module: str, names: list[str]) -> None:
    loaded = importlib.import_module(module)
    assert all(getattr(loaded, name) is not None for name in names)


def test_every_layer_says_what_it_owns_and_may_import() -> None:
    for layer in MAY_IMPORT:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text())) or ""
        assert "May import" in doc, f"xun.{layer} has no docstring saying what it may import"
