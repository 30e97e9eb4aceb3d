"""Build the Cython core, and the Doc reader / writer compiled against spaCy. Metadata lives in
pyproject.toml."""
import sysconfig
from importlib.metadata import version
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


# The newest Cython source (.pyx / .pxd) of the package, and this file: a module built in place
# before any of them changed is stale.
SOURCES_MTIME = max(p.stat().st_mtime for p in [Path(__file__), *Path("spacy_structperc").rglob("*.p[yx][xd]")])


def fresh_in_place(ext):
    """The module `pip install -e .` compiled beside ext's sources for this Python, if it is newer
    than every Cython source of the package; else None."""
    built = Path(*ext.name.split(".")).with_suffix(sysconfig.get_config_var("EXT_SUFFIX"))
    return built if built.exists() and built.stat().st_mtime > SOURCES_MTIME else None


class BuildExt(build_ext):
    """build_ext that, for a wheel built from a checkout already built in place, copies each fresh
    in-place module instead of compiling the core a second time; anything stale or missing is
    compiled as usual."""

    def build_extension(self, ext):
        built = None if self.inplace or self.force else fresh_in_place(ext)
        if built is None:
            return super().build_extension(ext)
        target = Path(self.get_ext_fullpath(ext.name))
        self.mkpath(str(target.parent))
        self.copy_file(str(built), str(target))

# Every .pyx in the core is a module; adding a file is enough to build it.
CORE_MODULES = sorted(p.stem for p in Path("spacy_structperc/_core").glob("*.pyx"))

extensions = [
    Extension(
        f"spacy_structperc._core.{name}",
        [f"spacy_structperc/_core/{name}.pyx"],
        include_dirs=[numpy.get_include()],
        extra_compile_args=["-O3"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name in CORE_MODULES
]

# _docarrays cimports spaCy (its .pxd files are found on sys.path) and reads and writes its C
# structs, so it is only valid for the spaCy it is compiled against: the version is compiled in
# (BUILT_FOR_SPACY), and spacy_structperc/docarrays.py uses the module only under a spaCy of the
# same major.minor. pyproject.toml's [build-system] requires the runtime range of spaCy.
extensions.append(
    Extension(
        "spacy_structperc._docarrays",
        ["spacy_structperc/_docarrays.pyx"],
        language="c++",   # spaCy's .pxd files cimport libcpp containers, as spaCy itself is C++
        include_dirs=[numpy.get_include()],
        extra_compile_args=["-O3"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                       ("STRUCTPERC_SPACY_VERSION", f'"{version("spacy")}"')],
    )
)



setup(
    cmdclass={"build_ext": BuildExt},
    # Nothing to translate when every module is reused (BuildExt copies them).
    ext_modules=extensions if all(map(fresh_in_place, extensions)) else cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    )
)
