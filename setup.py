"""Build the Cython core. Metadata lives in pyproject.toml."""
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

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    )
)
