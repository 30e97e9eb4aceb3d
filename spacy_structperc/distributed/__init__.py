"""Distributed training by iterative parameter mixing, and corpus annotation, on Dask.

Dask (`dask.distributed`) is an optional extra: `pip install -e ".[dask]"` from the checkout.
Nothing here imports it at module level, so the package imports without it; the commands raise
S340 when it is missing.
"""
from .mixing import mix_pipe_states, pipe_state, load_pipe_state

__all__ = ["mix_pipe_states", "pipe_state", "load_pipe_state"]
