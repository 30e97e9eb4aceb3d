"""Types: the compiled core has stubs for what Python sees, and mypy passes on the package."""
import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_module

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "spacy_structperc"
CORE = PACKAGE / "_core"
# Every compiled module: the core's, and those beside them in the package (_docarrays).
PYX = sorted(f"_core.{p.stem}" for p in CORE.glob("*.pyx")) + sorted(p.stem for p in PACKAGE.glob("*.pyx"))


def stub_names(path: Path):
    """Top-level names of a .pyi, and the public members of each class in it."""
    tree = ast.parse(path.read_text())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | \
                {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
            for base in node.bases:   # members a stub class inherits from one in the same stub
                if isinstance(base, ast.Name) and base.id in members:
                    members[node.name] |= members[base.id]
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    return names, members


@pytest.mark.parametrize("name", PYX)
def test_every_compiled_module_has_a_stub_with_its_public_api(name):
    stub = PACKAGE.joinpath(*name.split(".")).with_suffix(".pyi")
    assert stub.exists(), f"{stub.name} is missing: mypy cannot see spacy_structperc.{name}"
    module = importlib.import_module(f"spacy_structperc.{name}")
    names, members = stub_names(stub)
    public = {n for n, v in vars(module).items()
              if not n.startswith("_") and not inspect.ismodule(v)
              and not ((inspect.isclass(v) or inspect.isroutine(v))   # not imported classes
                       and getattr(v, "__module__", module.__name__) != module.__name__)}
    assert public <= names, f"not in {stub.name}: {sorted(public - names)}"
    for cls_name, declared in members.items():
        cls = getattr(module, cls_name)
        methods = {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}
        assert methods <= declared, f"{cls_name} methods not in {stub.name}: {sorted(methods - declared)}"
        for n in declared:
            assert hasattr(cls, n) or n.startswith("_") or n in ("__init__",), f"{cls_name}.{n} does not exist"


@pytest.mark.slow
def test_mypy_passes_on_the_package():
    require_module("mypy")
    result = subprocess.run([sys.executable, "-m", "mypy", "-p", "spacy_structperc"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
