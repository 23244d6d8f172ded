"""`mx.metal`: streamlet never runs on Metal; memory queries are the global ones, and the
Metal-only calls (capture, device_info) do nothing, as in MLX where Metal is absent."""
from __future__ import annotations

from .. import _public
from .ops.build import str_arg
from .memory import (clear_cache, get_active_memory, get_cache_memory,  # noqa: F401
                     get_peak_memory, reset_peak_memory, set_cache_limit, set_memory_limit,
                     set_wired_limit)


def is_available() -> bool:
    """Always False: there is no Metal backend."""
    return False


def device_info() -> dict:
    """The Metal device's description: empty, as there is none (see `mx.device_info`)."""
    return {}


def start_capture(path: str) -> None:
    """Start a Metal capture: nothing to capture without Metal, so nothing is done (as
    MLX does where Metal is absent).

    Args:
        path (str): where the capture would be saved (a `.gputrace` file).
    """
    str_arg(path, "start_capture", "path")


def stop_capture() -> None:
    """Stop a Metal capture: nothing was started (see `start_capture`)."""


__all__ = ["clear_cache", "device_info", "get_active_memory", "get_cache_memory",
           "get_peak_memory", "is_available", "reset_peak_memory", "set_cache_limit",
           "set_memory_limit", "set_wired_limit", "start_capture", "stop_capture"]


def __dir__():
    return _public.names(globals())
