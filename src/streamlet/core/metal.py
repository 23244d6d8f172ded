"""`mx.metal`: streamlet never runs on Metal; memory queries are the global ones."""
from .. import _public
from .memory import (clear_cache, get_active_memory, get_cache_memory,  # noqa: F401
                     get_peak_memory, reset_peak_memory, set_cache_limit, set_memory_limit,
                     set_wired_limit)


def is_available() -> bool:
    """Always False: there is no Metal backend."""
    return False


__all__ = ["clear_cache", "get_active_memory", "get_cache_memory", "get_peak_memory",
           "is_available", "reset_peak_memory", "set_cache_limit", "set_memory_limit",
           "set_wired_limit"]


def __dir__():
    return _public.names(globals())
