"""The package as a reader meets it: typed (py.typed and the native module's stub, which is
nanobind's stubgen of the built module), dir(tally) without imported helpers, and a docstring on
every public class and function."""

import inspect
import pathlib
import subprocess
import sys

import pytest

import tally
from conftest import ROOT, have

PKG = ROOT / "python" / "tally"


def test_py_typed_and_the_native_stub_are_shipped_beside_the_module():
    here = pathlib.Path(tally.__file__).parent
    assert (here / "py.typed").exists() and (here / "_tally.pyi").exists()


@pytest.mark.skipif(not have("nanobind"), reason="nanobind is not installed in this venv")
def test_native_stub_is_nanobinds_stubgen_of_the_built_module(tmp_path):
    out = tmp_path / "_tally.pyi"
    p = subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-m", "tally._tally", "-P",
                        "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == (PKG / "_tally.pyi").read_text(), (
        "python/tally/_tally.pyi is stale: regenerate it with "
        "`python -m nanobind.stubgen -m tally._tally -P -o python/tally/_tally.pyi`")


def test_dir_lists_the_public_api_only():
    names = dir(tally)
    assert names == sorted(set(tally.__all__) | {"torchmetrics", "functional", "mmengine"})
    for helper in ("Any", "Mapping", "annotations", "_json", "_tally"):
        assert helper not in names


def test_every_public_class_and_function_has_a_docstring():
    import tally.functional
    import tally.mmengine
    import tally.torchmetrics

    for module in (tally, tally.torchmetrics, tally.functional, tally.mmengine):
        for name in getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")]):
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                assert inspect.getdoc(obj), f"{module.__name__}.{name} has no docstring"
