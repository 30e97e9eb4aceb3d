"""Build the Cython core. Metadata lives in pyproject.toml."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

CORE_MODULES = ["weights", "templates", "transition", "tagging", "lookahead", "beam", "viterbi"]

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
