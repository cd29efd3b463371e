"""The engine reports, the front end draws; the interface holds no state (checked from the
source, nothing runs):

- tqdm is imported only by the front end (`notebook/`) and `cli.py`: the engine, the
  server, the client and the interface only report progress events;
- `interface/` keeps no mutable module-level state: no `global` rebinding, no module-level
  dict, list or set (a read-only mapping or a frozenset is fine; `__all__` is a list);
- no `global` statement in the engine's knowledge and agent parts (model caches, pools and
  clients belong to objects the engine owns);
- the outbound policy of model calls (`engine/outbound.py`, `engine/models/model_http.py`) is the
  engine's, not the process's: no module-level state there beyond immutable defaults (two
  engines in one process used to share, and overwrite, one policy and its lanes);
- no module of `server/` makes a worker pool at import: the lanes belong to the app, which
  closes them at shutdown (a pool made once per process in `routes/common.py` served HTTP's
  catalog routes instead of the app's catalog lane, and nothing ever closed it).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "kbsql"
DRAWERS = ("notebook/", "cli.py")
MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "deque", "OrderedDict", "Counter"}


def _modules(under: str = "") -> list[tuple[str, ast.Module]]:
    return [(str(p.relative_to(SRC)), ast.parse(p.read_text(encoding="utf-8")))
            for p in sorted((SRC / under).rglob("*.py"))]


def tqdm_importers() -> list[str]:
    out = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "tqdm" for n in names):
                out.append(f"{name}:{node.lineno}")
    return out


def mutable_module_state(tree: ast.Module) -> list[int]:
    """Lines of `global` statements and of module-level mutable containers."""
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Global)]
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if [ast.unparse(t) for t in targets] == ["__all__"]:
            continue
        value = node.value
        call = ast.unparse(value.func).split(".")[-1] if isinstance(value, ast.Call) else ""
        if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp) \
                or call in MUTABLE_CALLS:
            lines.append(node.lineno)
    return lines


def test_the_checks_can_fail() -> None:
    tree = ast.parse("_cache = {}\nX = frozenset()\ndef f():\n    global _cache\n__all__ = ['f']\n")
    assert mutable_module_state(tree) == [4, 1]


def test_only_the_front_end_imports_tqdm() -> None:
    outside = [hit for hit in tqdm_importers() if not hit.startswith(DRAWERS)]
    assert outside == [], f"tqdm imported outside notebook/ and cli.py: {outside}"
    assert any(hit.startswith("notebook/") for hit in tqdm_importers())  # the check sees imports


def test_the_interface_holds_no_mutable_state() -> None:
    found = {name: lines for name, tree in _modules("interface") if (lines := mutable_module_state(tree))}
    assert found == {}, f"mutable module-level state in interface/: {found}"


def test_no_module_globals_in_knowledge_and_agents() -> None:
    found = {name: [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Global)]
             for part in ("engine/knowledge", "engine/agents") for name, tree in _modules(part)}
    assert {k: v for k, v in found.items() if v} == {}


OUTBOUND = ("engine/outbound.py", "engine/models/model_http.py")


def module_instances(tree: ast.Module) -> list[int]:
    """Lines of module-level instances of the module's own classes that are not frozen
    dataclasses (`_state = _State()`: state shared by every caller in the process)."""
    frozen = {node.name: any("frozen=True" in ast.unparse(d) for d in node.decorator_list)
              for node in tree.body if isinstance(node, ast.ClassDef)}
    lines = []
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and frozen.get(value.func.id) is False:
            lines.append(node.lineno)
    return lines


def test_the_instance_check_can_fail() -> None:
    tree = ast.parse("@dataclass\nclass S: ...\n@dataclass(frozen=True)\nclass P: ...\n"
                     "_state = S()\nOPEN = P()\n")
    assert module_instances(tree) == [5]


def test_the_outbound_policy_is_no_process_state() -> None:
    found = {name: lines for name, tree in _modules("engine") if name in OUTBOUND
             and (lines := mutable_module_state(tree) + module_instances(tree))}
    assert len([name for name, _ in _modules("engine") if name in OUTBOUND]) == 2
    assert found == {}, f"module-level state in the outbound client: {found}"


POOL_MAKERS = {"Lanes", "Lane", "sized", "ThreadPoolExecutor", "ProcessPoolExecutor"}


def module_pools(tree: ast.Module) -> list[int]:
    """Lines of module-level assignments whose value makes a worker pool (anywhere in it)."""
    lines = []
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)] if value is not None else []
        if any(ast.unparse(c.func).split(".")[-1] in POOL_MAKERS for c in calls):
            lines.append(node.lineno)
    return lines


def test_the_pool_check_can_fail() -> None:
    tree = ast.parse("_default = Lanes.sized()\nPOOL = ThreadPoolExecutor(4)\nX = 1\n"
                     "def f():\n    return Lanes.sized()\n")
    assert module_pools(tree) == [1, 2]


def test_no_module_level_pool_in_the_server() -> None:
    modules = _modules("server")
    assert any(name == "server/lanes.py" for name, _ in modules)
    found = {name: lines for name, tree in modules if (lines := module_pools(tree))}
    assert found == {}, f"worker pools made at import in server/: {found}"
