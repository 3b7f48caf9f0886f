"""The map stays true: docs/design.md's layout table has one row per module
of official_bench and none for a module that is gone, a folder's
`__init__` docstring names only modules that exist, and tests/unit has a
folder for every folder of the package (sub-folders included).

In the table a folder's `__init__.py` is the folder's own row
(`official_bench/data/records/`); every other module is a row of its own.
A docstring names a module as `name.py` (in its folder), as a path
(`contracts/log_tree.py`, `official_bench/host/gpus.py`) or as a dotted
name (`official_bench.runtime.keras_setup`)."""

import ast
import fnmatch
import pathlib
import re

from support.helpers import REPO

ROOT = pathlib.Path(REPO)
PACKAGE = ROOT / "official_bench"
UNIT = ROOT / "tests" / "unit"


def layout_rows(text):
    """The package's rows of the "## Layout" table: [(path, what it is
    for)], in order; rows that name nothing under official_bench/ (the
    root scripts, configs, docs) are left out."""
    section = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, "docs/design.md has no '## Layout' section"
    rows = []
    for line in section.group(1).splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        paths = re.findall(r"`([^`]*)`", cells[0])
        if not any(p.startswith("official_bench") for p in paths):
            continue
        assert len(paths) == 1 and len(cells) == 2, (
            f"a row names one module and says what it is for: {line}")
        rows.append((paths[0], cells[1]))
    return rows


def module_paths(package=PACKAGE):
    """Every module as its table path: a folder's __init__.py as the
    folder (`official_bench/data/`), any other file as itself."""
    paths = set()
    for p in package.rglob("*.py"):
        rel = p.relative_to(package.parent)
        if p.name == "__init__.py":
            paths.add(rel.parent.as_posix() + "/")
        else:
            paths.add(rel.as_posix())
    return paths


def named_modules(doc):
    """The modules a docstring names: `x.py` and paths ending in .py, and
    dotted official_bench names (not calls); a path wrapped after a slash
    counts whole."""
    doc = re.sub(r"/\s*\n\s*", "/", doc)
    files = re.findall(r"(?<![\w/.])((?:[\w.-]+/)*\w+\.py)\b", doc)
    dotted = re.findall(r"\b(official_bench(?:\.\w+)+)\b(?!\()", doc)
    return files, dotted


def missing_names(folder, doc):
    """The names in `doc` (the docstring of `folder`'s __init__.py) that
    are no module of the repository."""
    files, dotted = named_modules(doc)
    package = folder
    while (package.parent / "__init__.py").exists():
        package = package.parent
    bases = (folder, package, package.parent)
    missing = [f for f in files
               if not any((base / f).is_file() for base in bases)]
    for name in dotted:
        here = package.parent
        for part in name.split("."):
            if here.is_file():
                break  # an attribute of a module
            if (here / (part + ".py")).is_file():
                here = here / (part + ".py")
            elif (here / part / "__init__.py").is_file():
                here = here / part
            else:
                missing.append(name)
                break
    return missing


def package_folders(package=PACKAGE):
    """The folders of the package that hold modules, relative to it."""
    return {p.parent.relative_to(package).as_posix()
            for p in package.rglob("*.py") if p.parent != package}


def test_the_layout_table_has_one_row_per_module():
    rows = layout_rows((ROOT / "docs" / "design.md").read_text())
    paths = [path for path, _ in rows]
    assert len(paths) == len(set(paths)), "a module has two rows"
    on_disk = module_paths()
    assert sorted(on_disk - set(paths)) == [], "modules without a row"
    assert sorted(set(paths) - on_disk) == [], "rows for no module"
    assert all(what for _, what in rows), "a row says nothing"


def test_folder_docstrings_name_only_modules_that_exist():
    bad = {}
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if init.parent == PACKAGE:
            continue  # the notebook API's docstring, not a folder's map
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        missing = missing_names(init.parent, doc)
        if missing:
            bad[init.relative_to(ROOT).as_posix()] = missing
    assert bad == {}


def test_tests_unit_mirrors_the_package_folders():
    """tests/unit/<folder> for each folder and sub-folder of the package,
    holding its tests, and no test folder for a folder that is gone."""
    folders = package_folders()
    assert {"data/records", "data/feeds", "data/build"} <= folders
    without_tests = sorted(f for f in folders
                           if not list((UNIT / f).glob("test_*.py")))
    assert without_tests == []
    test_folders = {p.parent.relative_to(UNIT).as_posix()
                    for p in UNIT.rglob("test_*.py") if p.parent != UNIT}
    assert sorted(test_folders - folders) == []


def test_pytest_collects_every_test_folder(pytestconfig):
    """No folder of tests/unit is one pytest skips (its default
    norecursedirs has "build")."""
    skipped = pytestconfig.getini("norecursedirs")
    assert sorted(f for f in package_folders()
                  for part in f.split("/")
                  if any(fnmatch.fnmatch(part, p) for p in skipped)) == []


def test_the_checks_see_a_stale_map(tmp_path):
    """A module without a row, a row without a module and a docstring
    naming a module that is gone are all seen."""
    pkg = tmp_path / "official_bench"
    (pkg / "data" / "records").mkdir(parents=True)
    for f in ("__init__.py", "trainer.py", "data/__init__.py",
              "data/factory.py", "data/records/__init__.py",
              "data/records/pipeline.py"):
        (pkg / f).write_text("")
    text = ("## Layout\n| path | holds |\n|---|---|\n"
            "| `official_bench/` | the API |\n"
            "| `official_bench/data/` | input |\n"
            "| `official_bench/data/gone.py` | was here |\n"
            "| `scripts/` | not the package |\n"
            "## Next\n| `official_bench/elsewhere.py` | not the table |\n")
    rows = {path for path, _ in layout_rows(text)}
    assert rows == {"official_bench/", "official_bench/data/",
                    "official_bench/data/gone.py"}
    assert sorted(module_paths(pkg) - rows) == [
        "official_bench/data/factory.py", "official_bench/data/records/",
        "official_bench/data/records/pipeline.py",
        "official_bench/trainer.py"]
    assert package_folders(pkg) == {"data", "data/records"}
    doc = ("factory.py, records/pipeline.py, scaling.py, data/gone.py, "
           "official_bench.data.factory.build, official_bench.data.nope, "
           "official_bench.run(cfg), tests/nothing.py")
    assert missing_names(pkg / "data", doc) == [
        "scaling.py", "data/gone.py", "tests/nothing.py",
        "official_bench.data.nope"]
