"""The layout keeps its shape: one concern per module, small modules, and imports that only go down the layers
(benchmarks, examples and experiments -> app -> demo -> tempo's tools -> rendering -> analysis -> the engine -> the
model -> video -> settings and errors); the engine is entered only through its face (and `tempo.engine.steps`, by
the code that composes its steps), and the demo only enters the library's rooms named here. Every module is named
in LAYERS, wherever it sits (a file at the root, a new folder): a package's entry covers its modules, but a
top-level one ("tempo") is the package's `__init__` alone, so a new room must be placed. Imports made by name
(`importlib.import_module("demo.server")`, `__import__`) count as imports."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT

MAX_LINES = 400
APP_MAX_LINES = 40
ENGINE = "tempo.engine"
STEPS = "tempo.engine.steps"  # the inner steps' own door, for the code that composes them itself
STEPS_USERS = ("tempo.bench", "tempo.conformance", "tempo.live", "tempo.analysis", "benchmarks")
FACE_MAX_NAMES = 15
# What the app may use of the library: the engine's face, what it reports (events, moments, errors, settings, times,
# rendering, analysis), the model it loads, the synthetic world's grading of the shipped examples, and the cutter of
# a moment's clip.
DEMO_MAY_ENTER = ("tempo.engine", "tempo.allocation", "tempo.analysis", "tempo.render", "tempo.events", "tempo.errors",
                  "tempo.moments", "tempo.config", "tempo.settings", "tempo.times", "tempo.model", "tempo.synthetic",
                  "tempo.live", "tempo.fetch", "tempo.video.clip")
# Lowest first. A module may import from its own layer or any layer below, never above.
LAYERS = [
    ["tempo.errors", "tempo.timing", "tempo.synthetic", "tempo.command_line", "tempo.paths"],
    ["tempo.times", "tempo.fetch"],
    ["tempo.allocation"],
    ["tempo.moments"],
    ["tempo.config"],
    ["tempo.settings"],
    ["tempo.video"],
    ["tempo.events"],
    ["tempo.model"],
    ["tempo.engine"],
    ["tempo.analysis"],
    ["tempo.render"],
    ["tempo.batch", "tempo.bench", "tempo.conformance", "tempo.cli", "tempo.train", "tempo.integrations",
     "tempo.live", "tempo.eval"],
    ["tempo", "tempo.__main__"],
    ["demo.refusals", "demo.preview", "demo.html", "demo.settings", "demo.live_view", "demo.hosts", "demo.stores"],
    ["demo.chat"],
    ["demo.device", "demo.handover"],
    ["demo.server", "demo.live_sources"],
    ["demo.handlers", "demo.api", "demo.live_api", "demo.live"],
    ["demo.tools"],
    ["demo.layout", "demo.live_layout"],
    ["demo.launch", "demo"],
    ["app"],
    ["benchmarks", "benchmarks.local_app", "benchmarks.server_watch", "benchmarks.mutants", "benchmarks.gpu",
     "benchmarks.mutation"],
    ["benchmarks.app_first_segment", "benchmarks.cold_start", "benchmarks.gpu_reservations", "benchmarks.live",
     "benchmarks.preprocess", "benchmarks.preview_proxy", "benchmarks.sharpest_frame", "benchmarks.cache_memory",
     "benchmarks.fuzz", "benchmarks.analysis_tools", "benchmarks.repeat_question", "benchmarks.screenshots",
     "benchmarks.moments_cost", "benchmarks.int8_deviation", "benchmarks.clip_speed", "benchmarks.shown_moments"],
    ["benchmarks.soak"],
    ["examples", "examples.make_examples", "examples.check_examples"],
    ["experiments.follow-ups.measure", "experiments.look-closer.measure", "experiments.tiny-v3.stage3_cost",
     "experiments.tiny-v3.tag_copy", "experiments.tiny-v4.decoder_cost", "experiments.tiny-v5.interval_ceiling",
     "experiments.tiny-v5.stage8_cost", "experiments.moments.compare", "experiments.moments.half_shift",
     "experiments.tiny-v6.sizing_sweep", "experiments.tiny-v6.choose_stage", "experiments.tiny-v7.digit_copy",
     "experiments.tiny-v7.tag_probe", "experiments.tiny-v7.two_objects", "experiments.tiny-v7.stage15_cost",
     "experiments.tiny-v7.relevance_again_cost"],
]
# Folders at the root that hold no module of the project: the tests, and what tools write (hidden folders, the
# virtual environment among them, are skipped too).
NOT_MODULES = ("tests", "build", "dist", "mutants", "outputs", "__pycache__")
BY_NAME = ("import_module", "__import__")  # the calls that import a module named by a string


def sources(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the repository but the tests, by its dotted name: the root's own files (app.py) and every
    folder's, at any depth."""
    modules = {}
    for folder, folders, files in os.walk(root):
        here = Path(folder)
        folders[:] = sorted(name for name in folders if not name.startswith(".") and name != "__pycache__"
                            and not (here == root and name in NOT_MODULES))
        for name in sorted(files):
            if name.endswith(".py"):
                parts = list((here / name).relative_to(root).with_suffix("").parts)
                modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = here / name
    return modules


def covers(entry: str, module: str) -> bool:
    """An entry is a module, or a subpackage and its modules; a top-level package's entry is its `__init__` alone."""
    return module == entry or ("." in entry and module.startswith(entry + "."))


def layer(module: str) -> int:
    """The layer of the longest table entry that covers `module`."""
    found = [(len(name), index) for index, names in enumerate(LAYERS) for name in names if covers(name, module)]
    if not found:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {Path(__file__).name}")
    return max(found)[1]


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `module` imports at run time (relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from package import module` imports the module; `from module import name` the module itself.
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}
        elif isinstance(node, ast.Call) and (named := imported_by_name(node)):
            found.add(named)
    tops = {name.split(".")[0] for name in known}
    return {name for name in found if name.split(".")[0] in tops}


def imported_by_name(call: ast.Call) -> str | None:
    """The module an `importlib.import_module("...")` or `__import__("...")` call names (a literal name only)."""
    function = call.func
    called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
    if called in BY_NAME and call.args and isinstance(call.args[0], ast.Constant) \
            and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def test_every_module_is_small():
    long = {module: n for module, path in sources().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > (APP_MAX_LINES if module == "app"
                                                                            else MAX_LINES)}
    assert not long, f"modules over {MAX_LINES} lines (app.py: {APP_MAX_LINES}): {long}"


def test_every_module_has_a_layer():
    unplaced = []
    for module in sources():
        try:
            layer(module)
        except AssertionError as exc:
            unplaced.append(str(exc))
    assert not unplaced, "\n".join(unplaced)


def test_a_new_module_must_be_placed_in_the_layers():
    """The check can fail: a new room of the library, the demo or the benchmarks is in no layer until it is named,
    however deep it sits in a package."""
    for module in ("tempo.newroom", "demo.newpanel", "benchmarks.newbench", "examples.newexample"):
        with pytest.raises(AssertionError, match=rf"^{module} is in no layer: add it to LAYERS"):
            layer(module)
    assert layer("tempo.video.newreader") == layer("tempo.video")  # a subpackage's entry covers its modules


def path_edits(files: dict[str, Path]) -> list[str]:
    """Every use of `sys.path` in code: a module is found as a package from the repository's root, never by a
    file putting its folder on the path."""
    return [f"{name}:{node.lineno} uses sys.path" for name, path in files.items()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
            and node.value.id == "sys"]


def test_no_file_edits_sys_path():
    tests = {f"tests.{path.stem}": path for path in sorted((ROOT / "tests").glob("*.py"))}
    assert not path_edits({**sources(), **tests}), "\n".join(path_edits({**sources(), **tests}))


def test_a_sys_path_edit_is_caught(tmp_path):
    """The check can fail: a benchmark that puts the root on the path to import its neighbours."""
    script = tmp_path / "bench.py"
    script.write_text("import sys\nsys.path[:0] = ['.']\nsys.path.insert(0, '..')\nprint('sys.path')\n",
                      encoding="utf-8")
    assert path_edits({"benchmarks.bench": script}) == ["benchmarks.bench:2 uses sys.path",
                                                        "benchmarks.bench:3 uses sys.path"]


def upward_imports(known: dict[str, Path]) -> list[str]:
    """Imports from a module of a layer above the importer's."""
    return [f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
            for module, path in known.items() for target in sorted(imports(module, path, known))
            if layer(target) > layer(module)]


def outside_the_library(known: dict[str, Path]) -> list[str]:
    """Imports by the library (tempo/) of anything of the project outside it."""
    return [f"{module} imports {target}" for module, path in known.items() if module.split(".")[0] == "tempo"
            for target in sorted(imports(module, path, known)) if target.split(".")[0] != "tempo"]


def test_imports_only_go_down_the_layers():
    assert not upward_imports(sources()), "\n".join(upward_imports(sources()))


def test_the_library_never_imports_the_demo():
    assert not outside_the_library(sources()), "\n".join(outside_the_library(sources()))


def test_no_module_imports_itself_through_others():
    known = sources()
    graph = {module: {t for t in imports(module, path, known) if t in known and t != module}
             for module, path in known.items()}
    # Packages import their own modules (their face); a cycle through a package face is not one of ours.
    graph = {m: {t for t in targets if not m.startswith(t + ".")} for m, targets in graph.items()}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                raise AssertionError("import cycle: " + " -> ".join(trail[trail.index(target):] + [target]))
            if not state.get(target):
                visit(target, trail + [target])
        state[module] = 2

    for module in sorted(graph):
        if not state.get(module):
            visit(module, [module])


def test_an_upward_import_is_caught(tmp_path):
    """The checks can fail: a reader that formats times with the rendering code is an upward import."""
    path = tmp_path / "readers.py"
    path.write_text("from ..render.text import clock\nfrom . import sampling\n", encoding="utf-8")
    found = imports("tempo.video.readers", path, sources())
    assert found == {"tempo.render.text", "tempo.video.sampling"}
    path.write_text("import tempo.render.text\nimport tempo.video.sampling, numpy\n", encoding="utf-8")
    assert imports("tempo.video.readers", path, sources()) == {"tempo.render.text", "tempo.video.sampling"}
    assert layer("tempo.render.text") > layer("tempo.video.readers") == layer("tempo.video.sampling")


def engine_inner_imports(known: dict[str, Path]) -> list[str]:
    """Imports of the engine's inner modules from outside the engine (its face, `tempo.engine`, is the way in;
    `tempo.engine.steps` is the door for the benchmark, the conformance check and live mode)."""
    return [f"{module} imports {target}" for module, path in known.items() if not module.startswith(ENGINE + ".")
            and module != ENGINE for target in sorted(imports(module, path, known)) if target.startswith(ENGINE + ".")
            and not (target == STEPS and any(module == user or module.startswith(user + ".") for user in STEPS_USERS))]


def demo_trespassing(known: dict[str, Path]) -> list[str]:
    """Imports from demo/ (and app.py) of library rooms it may not enter."""
    return [f"{module} imports {target}" for module, path in known.items() if module.split(".")[0] in ("demo", "app")
            for target in sorted(imports(module, path, known)) if target.startswith("tempo")
            and not any(target == room or target.startswith(room + ".") for room in DEMO_MAY_ENTER)]


def test_only_the_engine_uses_its_inner_modules():
    assert not engine_inner_imports(sources()), "\n".join(engine_inner_imports(sources()))


def test_the_engine_s_face_is_small():
    import tempo.engine

    assert len(tempo.engine.__all__) <= FACE_MAX_NAMES, tempo.engine.__all__
    modules = ("accelerator", "budget", "cache", "host", "job", "request", "zoom", "steps")
    assert set(tempo.engine.__all__) == {name for name in vars(tempo.engine) if not name.startswith("_")
                                         and name not in modules}


def test_the_demo_enters_only_its_rooms_of_the_library():
    assert not demo_trespassing(sources()), "\n".join(demo_trespassing(sources()))


def test_an_inner_engine_import_from_the_demo_is_caught(tmp_path):
    """The checks can fail: a server that reaches past the face into the engine's cache module, and a handler that
    probes files itself, are both refused."""
    known = sources()
    server = tmp_path / "server.py"
    server.write_text("from tempo.engine.cache import VideoCache\nfrom tempo.engine import serve\n"
                      "from tempo.engine.steps import respond\n", encoding="utf-8")
    handlers = tmp_path / "handlers.py"
    handlers.write_text("from tempo.video import probe\n", encoding="utf-8")
    app = tmp_path / "app.py"
    app.write_text("from tempo.train import recipe\n", encoding="utf-8")
    patched = {**known, "demo.server": server, "demo.handlers": handlers, "app": app}
    assert engine_inner_imports(patched) == ["demo.server imports tempo.engine.cache",
                                             "demo.server imports tempo.engine.steps"]
    assert demo_trespassing(patched) == ["app imports tempo.train.recipe", "demo.handlers imports tempo.video.probe"]


def test_every_module_at_the_root_or_in_a_new_folder_is_found(tmp_path):
    """The check can fail: a helper dropped at the root, or a new folder of tools, is a module the layers must
    place; the tests, hidden folders (a virtual environment) and tools' outputs are not."""
    for name in ("app.py", "helpers.py", "tools/sweep.py", "tools/deep/__init__.py", "tests/test_x.py",
                 ".venv/lib/site.py", "mutants/tempo/x.py", "tempo/__pycache__/x.py", "tempo/times.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    assert sorted(sources(tmp_path)) == ["app", "helpers", "tempo.times", "tools.deep", "tools.sweep"]
    for module in ("helpers", "tools.sweep", "tools.deep"):
        with pytest.raises(AssertionError, match=rf"^{module} is in no layer"):
            layer(module)
    assert "app" in sources() and all(not name.startswith("tests") for name in sources())


def test_an_import_by_name_is_an_import(tmp_path):
    """The checks can fail: the library reaching the demo lazily through importlib, or by `__import__`."""
    known = sources()
    lazy = tmp_path / "lazy.py"
    lazy.write_text("import importlib\nfrom importlib import import_module\n\n\ndef late(name):\n"
                    "    importlib.import_module('demo.server')\n    import_module('tempo.render.text')\n"
                    "    __import__('app')\n    importlib.import_module(name)\n    importlib.import_module('numpy')\n"
                    "    print('demo.html')\n", encoding="utf-8")
    assert imports("tempo.video.lazy", lazy, known) == {"demo.server", "tempo.render.text", "app"}
    patched = {"tempo.video.lazy": lazy, "demo.server": known["demo.server"], "app": known["app"],
               "tempo.render.text": known["tempo.render.text"]}
    assert outside_the_library(patched) == ["tempo.video.lazy imports app", "tempo.video.lazy imports demo.server"]
    upward = upward_imports(patched)  # "tempo.video.lazy (layer 5) imports app (layer 21)", ...
    assert [line.split(" (layer ")[0] for line in upward] == ["tempo.video.lazy"] * 3
    assert [line.split(" imports ")[1].split(" (layer ")[0] for line in upward] == ["app", "demo.server",
                                                                                    "tempo.render.text"]
