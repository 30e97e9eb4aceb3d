from typing import Optional, Union

from .kernel import Kernel

class Expansion:
    degree: int
    n_features: int
    @property
    def n_bytes(self) -> int: ...

def _expansion_for(kernel: Kernel, expand: Union[str, bool]) -> Optional[Expansion]: ...
