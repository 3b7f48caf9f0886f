"""Arrows only point down: every import of every module obeys the one order
of layers declared in docs/design.md, and the TensorFlow-free folders stay
TensorFlow-free through everything they import."""

import ast
import pathlib
import re

import pytest

from support.helpers import REPO

PACKAGE = pathlib.Path(REPO) / "official_bench"
TOP = "official_bench"  # the entry points at the top of the package
TF_ROOTS = ("tensorflow", "tf_keras", "keras", "horovod")


def declared_layers(text):
    """The ```layers block of docs/design.md: a list of (folders, tf_free)
    per line, highest first."""
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    if not block:
        raise AssertionError("docs/design.md has no ```layers block")
    layers = []
    for line in block.group(1).splitlines():
        words, _, note = line.partition("#")
        if not words.strip():
            continue
        folders = words.split()
        tf_free = set()
        for part in note.split(";"):
            if part.strip().endswith("tf-free"):
                named = part.replace("tf-free", "").replace(":", " ")
                named = named.replace(",", " ").split()
                tf_free |= set(named) if named else set(folders)
        layers.append((folders, tf_free))
    return layers


def imports_of(path):
    """Every official_bench module or outside package `path` imports, at any
    depth (lazy imports inside functions too), as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: relative import"
            if node.module != TOP:  # `from official_bench import x`: x counts
                found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names
                      if node.module.startswith(TOP)}
    return found


def module_name(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def folder_of(dotted, folders):
    """The layer folder of an official_bench module name; TOP for the
    entry points and the package itself."""
    parts = dotted.split(".")
    if len(parts) > 1 and parts[1] in folders:
        return parts[1]
    return TOP


def modules():
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def upward_imports(mods, layers):
    rank = {f: i for i, (fs, _) in enumerate(layers) for f in fs}
    peers = {f: set(fs) for fs, _ in layers for f in fs}
    bad = []
    for name, path in mods.items():
        src = folder_of(name, rank)
        for target in imports_of(path):
            if not target.startswith(TOP):
                continue
            dst = folder_of(target, rank)
            if dst == src:
                continue
            if rank[dst] < rank[src]:
                bad.append(f"{name} imports {target} ({dst} is above {src})")
            elif dst in peers[src]:
                bad.append(f"{name} imports {target} ({dst} is {src}'s peer)")
    return bad


# tf-free folders that may import Keras 3: the JAX backend imports it only
# after setting its backend to JAX (jax_backend/keras3.py).
KERAS3_FOLDERS = {"jax_backend"}


def first_chain(graph, mods, start, roots):
    """The first chain of imports from `start` that reaches a package in
    `roots` (" -> "-joined), or None."""
    seen, stack = {start}, [(start, [start])]
    while stack:
        node, chain = stack.pop()
        for target in sorted(graph.get(node, ())):
            if target.split(".")[0] in roots:
                return " -> ".join(chain + [target])
            if target in mods and target not in seen:
                seen.add(target)
                stack.append((target, chain + [target]))
    return None


def tensorflow_reached(mods, layers):
    """For each module in a tf-free folder, the first chain of imports that
    reaches TensorFlow (or Keras, or Horovod; Keras 3 is allowed in
    KERAS3_FOLDERS)."""
    folders = {f for fs, _ in layers for f in fs}
    free = {f for _, tf_free in layers for f in tf_free}
    graph = {n: imports_of(p) for n, p in mods.items()}
    bad = []
    for name in mods:
        folder = folder_of(name, folders)
        if folder not in free:
            continue
        roots = set(TF_ROOTS) - ({"keras"} if folder in KERAS3_FOLDERS
                                 else set())
        chain = first_chain(graph, mods, name, roots)
        if chain:
            bad.append(chain)
    return bad


def declared_sublayers(text):
    """The ```sublayers block of docs/design.md: for each folder with
    sub-folders, its units top to bottom. A unit is the folder's own
    modules ("data"), a sub-folder ("data/records") or one module of the
    folder named on its own ("data/preprocessing.py"). Returns {unit:
    (rank, line)}; units on one line are peers."""
    block = re.search(r"```sublayers\n(.*?)```", text, re.S)
    if not block:
        raise AssertionError("docs/design.md has no ```sublayers block")
    units = {}
    lines = [line.partition("#")[0].split()
             for line in block.group(1).splitlines()]
    for rank, line in enumerate(x for x in lines if x):
        for unit in line:
            assert unit not in units, f"{unit} declared twice"
            units[unit] = (rank, tuple(line))
    return units


def unit_of(dotted, units):
    """The declared unit an official_bench module name belongs to: the
    module itself when it is named, else its deepest declared folder."""
    parts = dotted.split(".")[1:]
    if "/".join(parts) + ".py" in units:
        return "/".join(parts) + ".py"
    for n in range(len(parts), 0, -1):
        if "/".join(parts[:n]) in units:
            return "/".join(parts[:n])
    return None


def sub_folder_imports(mods, units):
    """Imports between two units of one folder that point upwards or to a
    peer. Importing a package the module sits in is not counted: Python
    imports it first anyway."""
    bad = []
    for name, path in mods.items():
        src = unit_of(name, units)
        if src is None:
            continue
        for target in imports_of(path):
            dst = unit_of(target, units) if target.startswith(TOP) else None
            if (dst is None or dst == src or name.startswith(target + ".")
                    or dst.split("/")[0] != src.split("/")[0]):
                continue
            (src_rank, src_line), (dst_rank, _) = units[src], units[dst]
            if dst_rank < src_rank:
                bad.append(f"{name} imports {target} ({dst} is above {src})")
            elif dst in src_line:
                bad.append(f"{name} imports {target} ({dst} is {src}'s peer)")
    return bad


@pytest.fixture(scope="module")
def sublayers():
    return declared_sublayers((pathlib.Path(REPO) / "docs" / "design.md")
                              .read_text())


@pytest.fixture(scope="module")
def layers():
    return declared_layers((pathlib.Path(REPO) / "docs" / "design.md")
                           .read_text())


def test_every_folder_of_the_package_is_declared(layers):
    declared = [f for fs, _ in layers for f in fs]
    assert declared[0] == TOP and len(declared) == len(set(declared))
    on_disk = {p.parent.relative_to(PACKAGE).parts[0]
               for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}
    assert on_disk == set(declared) - {TOP}


def test_top_of_the_package_holds_only_the_entry_points():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == [
        "__init__.py", "classifier_trainer.py", "trainer.py"]


# The JAX backend's path runs where TensorFlow is not installed: the
# entry points it comes through and everything they import, and the
# TensorFlow-free records reader its loader workers run (data/records/
# host_examples.py) with the framing check's answers (file_verdict.py).
JAX_PATH = ("official_bench", "official_bench.classifier_trainer",
            "official_bench.trainer", "official_bench.jax_backend.trainer",
            "official_bench.data.records.host_examples",
            "official_bench.data.records.file_verdict")


def tensorflow_reached_from(mods, starts):
    """The first chain from each of `starts` that reaches TensorFlow, Keras
    2 or Horovod. Keras 3 counts as free here: the JAX path imports it
    after choosing its backend (jax_backend/keras3.py)."""
    graph = {n: imports_of(p) for n, p in mods.items()}
    roots = set(TF_ROOTS) - {"keras"}
    chains = [first_chain(graph, mods, start, roots) for start in starts]
    return [c for c in chains if c]


def test_the_jax_path_never_imports_tensorflow():
    mods = modules()
    assert set(JAX_PATH) <= set(mods)
    assert tensorflow_reached_from(mods, JAX_PATH) == []
    # and the check sees it when one does
    mods = dict(mods)
    assert tensorflow_reached_from(
        {**mods, "official_bench.jax_backend.trainer":
         PACKAGE / "training" / "tf_trainer.py"},
        ["official_bench.jax_backend.trainer"])


def test_no_import_points_upwards_or_sideways(layers):
    mods = modules()
    assert len(mods) > 100, sorted(mods)  # the walk found the package
    assert upward_imports(mods, layers) == []


def test_tensorflow_free_folders_stay_free(layers):
    free = {f for _, tf_free in layers for f in tf_free}
    assert free == {"launch", "extract", "judge", "config", "contracts",
                    "host", "jax_backend", "deploy"}
    assert tensorflow_reached(modules(), layers) == []


def test_the_checks_see_a_violation(tmp_path, layers):
    """Each spelling of an upward, sideways or TensorFlow import is caught."""
    pkg = tmp_path / "official_bench"
    for folder in ("data", "models", "launch", "extract", "host"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "data" / "a.py").write_text(
        "def f():\n    import official_bench.models.resnet\n")
    (pkg / "data" / "b.py").write_text("from official_bench import models\n")
    (pkg / "launch" / "c.py").write_text(
        "from official_bench.extract import cases\n")
    (pkg / "host" / "d.py").write_text("from official_bench.data import a\n")
    (pkg / "extract" / "cases.py").write_text("import official_bench.host.e\n")
    (pkg / "host" / "e.py").write_text(
        "def g():\n    from tensorflow import nest\n")
    mods = {}
    for p in sorted(pkg.rglob("*.py")):
        parts = list(p.relative_to(tmp_path).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = p
    bad = upward_imports(mods, layers)
    assert any(b.startswith("official_bench.data.a imports "
                            "official_bench.models.resnet") for b in bad)
    assert any(b.startswith("official_bench.data.b imports "
                            "official_bench.models") for b in bad)
    assert any("peer" in b and b.startswith("official_bench.launch.c")
               for b in bad)
    assert any(b.startswith("official_bench.host.d") for b in bad)
    reached = tensorflow_reached(mods, layers)
    assert ("official_bench.extract.cases -> official_bench.host.e -> "
            "tensorflow") in reached


def test_every_sub_folder_is_declared(sublayers):
    """Each folder with sub-folders orders them and its own modules; each
    declared unit exists."""
    on_disk = {str(p.parent.relative_to(PACKAGE))
               for p in PACKAGE.rglob("__init__.py")
               if len(p.parent.relative_to(PACKAGE).parts) > 1}
    parents = {d.split("/")[0] for d in on_disk}
    for unit in sublayers:
        assert (PACKAGE / unit).exists(), f"{unit} is declared, not on disk"
    folders = {u for u in sublayers if not u.endswith(".py")}
    assert folders == on_disk | parents


def test_no_import_points_up_or_sideways_between_sub_folders(sublayers):
    assert sub_folder_imports(modules(), sublayers) == []


def test_the_sub_folder_check_sees_a_violation(tmp_path, sublayers):
    """Upward (a sub-folder importing its folder's own modules) and sideways
    (two peer sub-folders) imports are caught; a module importing the
    package it sits in, or a lower unit, is not."""
    pkg = tmp_path / "official_bench" / "data"
    for folder in ("records", "feeds", "build"):
        (pkg / folder).mkdir(parents=True)
    (pkg / "records" / "a.py").write_text(
        "from official_bench.data import factory\n")
    (pkg / "feeds" / "b.py").write_text(
        "def f():\n    import official_bench.data.build.c\n")
    (pkg / "build" / "c.py").write_text(
        "from official_bench.data.records import a\n"
        "from official_bench.data.build import d\n")
    (pkg / "factory.py").write_text(
        "import official_bench.data.feeds.b\n")
    mods = {"official_bench.data.records.a": pkg / "records" / "a.py",
            "official_bench.data.feeds.b": pkg / "feeds" / "b.py",
            "official_bench.data.build.c": pkg / "build" / "c.py",
            "official_bench.data.factory": pkg / "factory.py"}
    assert sub_folder_imports(mods, sublayers) == [
        "official_bench.data.records.a imports official_bench.data.factory"
        " (data is above data/records)",
        "official_bench.data.feeds.b imports official_bench.data.build.c"
        " (data/build is data/feeds's peer)"]
