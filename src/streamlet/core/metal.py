"""`mx.metal`: streamlet never runs on Metal; memory queries are the global ones."""
from .memory import (clear_cache, get_active_memory, get_cache_memory,  # noqa: F401
                     get_peak_memory, reset_peak_memory, set_cache_limit, set_memory_limit,
                     set_wired_limit)


def is_available() -> bool:
    """Always False: there is no Metal backend."""
    return False
