"""The layers of docs/architecture.md: the producer API never imports worker code.

Read from the source (ast), so a lazy import inside a function is caught as
surely as one at the top of a module, and proved at run time in a fresh
interpreter that queues and inspects jobs without ever loading the worker.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import taskforge

PACKAGE = Path(taskforge.__file__).parent
# The API layer: what a producer imports to define, queue and follow jobs.
API_MODULES = [
    "taskforge",
    "taskforge.app",
    "taskforge.bounds",
    "taskforge.call_arguments",
    "taskforge.celery_names",
    "taskforge.context",
    "taskforge.decorator_options",
    "taskforge.depending",
    "taskforge.errors",
    "taskforge.finals",
    "taskforge.handle",
    "taskforge.hooks",
    "taskforge.import_names",
    "taskforge.job",
    "taskforge.job_ids",
    "taskforge.job_json",
    "taskforge.named_limits",
    "taskforge.joins",
    "taskforge.other_names",
    "taskforge.building",
    "taskforge.periodic",
    "taskforge.protocols",
    "taskforge.queue_handle",
    "taskforge.search",
    "taskforge.sending",
    "taskforge.stacking",
    "taskforge.serialization",
    "taskforge.serialization.codec",
    "taskforge.serialization.format",
    "taskforge.serialization.framing",
    "taskforge.serialization.messages",
    "taskforge.streams",
    "taskforge.task",
    "taskforge.task_options",
    "taskforge.testing",
    "taskforge.workflow_seam",
    "taskforge.workflows",
    "taskforge.workflows.aio_delivery",
    "taskforge.workflows.aio_launch",
    "taskforge.workflows.canvas",
    "taskforge.workflows.delivery",
    "taskforge.workflows.following",
    "taskforge.workflows.handle",
    "taskforge.workflows.launch",
    "taskforge.workflows.plan",
    "taskforge.workflows.record",
    "taskforge.workflows.reports",
    "taskforge.workflows.resume",
    "taskforge.workflows.spec",
    "taskforge.zones",
]
# The operator tools: what a person runs or reads (status documents, metrics, log lines, loading
# ``module:app``, the development broker and demo, bulk actions and forgetting a queue, ``--since``),
# and the CLI and the dashboard on top of them.
OPERATOR_TOOLS = (
    "taskforge.bulk",
    "taskforge.cli",
    "taskforge.dashboard",
    "taskforge.demo_app",
    "taskforge.devbroker",
    "taskforge.forgetting",
    "taskforge.loader",
    "taskforge.logs",
    "taskforge.metrics",
    "taskforge.since",
    "taskforge.status",
)
WORKER = "taskforge.worker"
WORKFLOWS = "taskforge.workflows"
# What installs the workflows on the worker's seam (taskforge/workflow_seam.py), and who must load it.
SEAM_INSTALLER = "taskforge.workflows.reports"
# The one door from the API to the worker's runner, and who may open it (inside a function only, for app).
DOOR = "taskforge.inprocess"
DOOR_OPENERS = {"taskforge.app": "function", "taskforge.testing": "module"}


def source_path(module: str) -> Path:
    parts = module.split(".")[1:]
    path = PACKAGE.joinpath(*parts)
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def imported(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names an import statement of ``module`` may load (a package and its members)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = module if source_path(module).name == "__init__.py" else module.rpartition(".")[0]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def import_statements(module: str) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of ``module`` that may run, however deeply nested, and whether at module level."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, top))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
            elif is_type_checking(child):
                continue  # never executed: the names are for the type checker
            else:
                visit(child, top)

    visit(ast.parse(source_path(module).read_text()), True)
    return found


def imports(module: str) -> list[tuple[str, bool, int]]:
    """(name, at module level, line) for every import in ``module``, however deeply nested."""
    return [(name, top, node.lineno) for node, top in import_statements(module) for name in imported(module, node)]


def loaded_at_import(module: str) -> set[str]:
    """Every taskforge module that importing ``module`` executes, following module-level imports."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or not name.startswith("taskforge") or not source_path(name).exists():
            continue
        seen.add(name)
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo += parents + [found for found, top, _ in imports(name) if top]
    return seen


@pytest.mark.parametrize("module", API_MODULES)
def test_api_module_imports_nothing_from_the_worker(module: str) -> None:
    for name, top, line in imports(module):
        where = f"{source_path(module).relative_to(PACKAGE.parent)}:{line}"
        assert not name.startswith(WORKER), f"{where} imports {name}: the API must not import worker code"
        if name.startswith(DOOR):
            allowed = DOOR_OPENERS.get(module)
            assert allowed is not None, f"{where} imports {name}; only {sorted(DOOR_OPENERS)} may"
            assert top == (allowed == "module"), f"{where} imports {name} at the wrong level (allowed: {allowed})"
    tree = ast.parse(source_path(module).read_text())
    dynamic = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("import_module", "__import__")
    ]
    assert not dynamic, f"{module} imports by name at lines {dynamic}, out of this test's sight"


@pytest.mark.parametrize("module", API_MODULES)
def test_importing_an_api_module_loads_no_worker_module(module: str) -> None:
    loaded = loaded_at_import(module)
    reached = sorted(name for name in loaded if name.startswith(WORKER))
    assert not reached, f"importing {module} loads {reached}"
    if DOOR_OPENERS.get(module) != "module":
        assert DOOR not in loaded, f"importing {module} loads {DOOR}, which only a drain may load"


CORE = ("taskforge.errors", "taskforge.job", "taskforge.serialization")


def package_modules(package: str) -> list[str]:
    folder = source_path(package).parent
    return sorted(
        ".".join([package, *path.relative_to(folder).with_suffix("").parts]).removesuffix(".__init__")
        for path in folder.rglob("*.py")
    )


@pytest.mark.parametrize("module", [*package_modules("taskforge.broker"), *package_modules("taskforge.serialization")])
def test_the_broker_and_the_wire_format_import_only_core_data(module: str) -> None:
    """The broker knows keys, scripts and records; not tasks, apps, hooks or workers."""
    home = "taskforge.broker" if module.startswith("taskforge.broker") else "taskforge.serialization"
    for name, _, line in imports(module):
        if name.startswith("taskforge") and not name.startswith(home):
            assert name.startswith(CORE), f"{source_path(module).name}:{line} of {module} imports {name}"


def runtime_edges(module: str, known: set[str]) -> set[str]:
    """The package modules (of ``known``) that running ``module`` may import: lazy imports inside
    functions count, ``if TYPE_CHECKING:`` blocks do not. ``from p import m`` is an edge to module
    ``p.m``; ``from p import name`` to ``p``."""
    edges: set[str] = set()
    for node, _ in import_statements(module):
        names = imported(module, node)
        if isinstance(node, ast.Import):
            edges.update(name for name in names if name in known)
            continue
        base, members = names[0], [name for name in names[1:] if name in known]
        edges.update(members)
        if len(members) < len(names) - 1 and base in known:
            edges.add(base)
    return edges - {module}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle of ``graph`` met by a depth-first walk, as the path that closes it (first == last)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                walk(target)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    return cycles


def test_no_runtime_import_cycle_in_the_package() -> None:
    """Modules import one another one way only, lazy imports included: each layer of
    docs/architecture.md, and each module within it, can be read (and loaded) after what it uses."""
    modules = package_modules("taskforge")
    known = set(modules)
    cycles = import_cycles({module: runtime_edges(module, known) for module in modules})
    assert not cycles, "runtime import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_the_cycle_finder_sees_lazy_imports_and_closes_cycles() -> None:
    known = set(package_modules("taskforge"))
    assert "taskforge.inprocess" in runtime_edges("taskforge.app", known), "missed the lazy import in app.drain()"
    assert "taskforge.status" in runtime_edges("taskforge.cli.status", known), "missed 'from .. import status'"
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_lazy_and_relative_worker_imports() -> None:
    names = [name for name, top, _ in imports("taskforge.inprocess")]
    assert "taskforge.worker.runner" in names, "the reader missed the lazy import inside inprocess.drain()"
    assert {"taskforge.inprocess", "taskforge.inprocess.drain"} <= {n for n, _, _ in imports("taskforge.app")}
    assert WORKER + ".runner" in loaded_at_import("taskforge.worker.child")


def every_import(module: str) -> list[tuple[str, int]]:
    """(name, line) for every import statement of ``module``, ``if TYPE_CHECKING:`` blocks included."""
    tree = ast.parse(source_path(module).read_text())
    nodes = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    return [(name, node.lineno) for node in nodes for name in imported(module, node)]


@pytest.mark.parametrize("module", package_modules(WORKER))
def test_the_worker_meets_workflows_only_through_the_seam(module: str) -> None:
    """The worker runs a workflow's steps as plain jobs; what only workflows know (deliver a step's
    report, send the next steps, repair what a crash left) it calls through the ``WorkflowSeam``
    workflows install (``workflow_seam.py``), so workflow code changes without touching the
    worker, and the worker never pulls workflows in. Not even for the type checker: names the
    worker needs are the seam's."""
    for name, line in every_import(module):
        assert not name.startswith(WORKFLOWS), (
            f"{source_path(module).relative_to(PACKAGE.parent)}:{line} imports {name}: "
            "the worker reaches workflows through taskforge.workflow_seam only"
        )


def test_every_app_loads_what_installs_the_workflows_on_the_seam() -> None:
    """A worker's supervisor and children load the user's app before anything else: importing
    ``taskforge.app`` must install the seam, or a worker whose app never names workflows would
    leave every step's report to nobody."""
    assert SEAM_INSTALLER in loaded_at_import("taskforge.app")
    assert "taskforge.workflow_seam" in {name for name, top, _ in imports(SEAM_INSTALLER) if top}
    assert not any(name.startswith(WORKFLOWS) for name in loaded_at_import("taskforge.workflow_seam"))


def is_within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


@pytest.mark.parametrize("module", API_MODULES)
def test_no_api_module_imports_an_operator_tool(module: str) -> None:
    """Operator tools sit on top of the API: they read what the API and the broker hold and shape it
    for a person (a status document, a metric, a table, a page). An API module that imported one
    would make every producer load code it never uses (the dashboard's needs an extra), and would
    tie what the API returns to how a tool displays it: what both need (a job as JSON, for
    ``JobPage.to_dict()`` and ``job --json``) lives on the API's side, in ``job_json.py``."""
    assert not is_within(module, OPERATOR_TOOLS), f"{module} is listed both as API and as an operator tool"
    for name, line in every_import(module):
        assert not is_within(name, OPERATOR_TOOLS), (
            f"{source_path(module).relative_to(PACKAGE.parent)}:{line} imports {name}, an operator tool"
        )


def test_every_root_module_is_placed_in_a_layer() -> None:
    """A new module of the package's root is put in a layer on purpose, so the rules above see it."""
    placed = {*API_MODULES, *OPERATOR_TOOLS, *CORE, DOOR, "taskforge.broker", WORKER}
    placed |= {"taskforge.__main__", "taskforge.contrib", "taskforge.printable"}  # entry point, extras, a helper
    root = {module for module in package_modules("taskforge") if module.count(".") == 1}
    assert not root - placed, f"place these in a layer of tests/test_layers.py: {sorted(root - placed)}"


def test_the_seam_test_reads_type_checking_imports_too() -> None:
    names = {name for name, _ in every_import("taskforge.worker.courier")}
    assert "taskforge.broker.workflows.StepReport" in names, "missed the import under TYPE_CHECKING"


PRODUCER = """
import sys
from datetime import timedelta
from taskforge import TaskForge

app = TaskForge("layers", broker="memory://")

@app.task(unique=True)
def add(a, b):
    return a + b

@app.periodic(every=timedelta(minutes=5))
def tick():
    return None

handle = add.delay(1, 2)
add.apply_in(60, 3, 4)
add.delay_many([(5, 6)])
app.send("elsewhere.task", 1)
assert handle.info().args == (1, 2) and app.job(handle.id).status() == "pending"
handle.cancel()
print(sorted(name for name in sys.modules if name.startswith(("taskforge.worker", "taskforge.inprocess"))))
app.drain()
print("taskforge.worker.runner" in sys.modules)
"""


def test_a_producer_never_loads_the_worker_until_it_drains() -> None:
    done = subprocess.run([sys.executable, "-c", PRODUCER], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "True"], done.stdout


def test_no_module_of_the_package_is_over_400_lines() -> None:
    """The project's own size guide: a module that grows past it is split by responsibility.

    Lua files too: a script, or a room of the scripts' library (``lua/lib/``).
    """
    long = {
        str(path.relative_to(PACKAGE)): n
        for pattern in ("*.py", "*.lua")
        for path in PACKAGE.rglob(pattern)
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert not long, f"split these by responsibility: {long}"


def test_nothing_outside_contrib_imports_an_integration() -> None:
    """``contrib`` needs extras (opentelemetry, Django): the package itself must never load it."""
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(("taskforge", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        if module.startswith("taskforge.contrib"):
            continue
        for name, _, line in imports(module):
            assert not name.startswith("taskforge.contrib"), f"{module}:{line} imports {name}"
