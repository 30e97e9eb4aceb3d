"""The Dask extra is optional: without it the commands raise S340 naming the extra."""
import sys

import pytest

from spacy_structperc.distributed._dask import require_dask


def test_missing_dask_raises_a_coded_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)   # makes `import distributed` fail
    with pytest.raises(ImportError, match=r"S340.*pip install -e \"\.\[dask\]\""):
        require_dask("annotate")
