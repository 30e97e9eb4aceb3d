"""Build the Cython core, and the Doc reader / writer compiled against spaCy. Metadata lives in
pyproject.toml."""
from importlib.metadata import version
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

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
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    )
)
