"""Devices: `Device(cpu, 0)`, the default device and device queries."""
from __future__ import annotations

import enum
import operator
import os
import platform
import threading

from ..backend import gpu_count, gpu_info
from .errors import called


class DeviceType(enum.Enum):
    """The kinds of device, `mx.cpu` and `mx.gpu`.

    A DeviceType is accepted wherever a Device is, and stands for the device of
    that type with index 0.

    >>> mx.Device(mx.cpu) == mx.cpu, mx.cpu
    (True, DeviceType.cpu)
    """

    cpu = 0
    gpu = 1

    def __repr__(self):
        return f"DeviceType.{self.name}"

    __str__ = __repr__


cpu, gpu = DeviceType.cpu, DeviceType.gpu


class Device:
    """A device, a small immutable value equal to its bare DeviceType.

    Devices compare equal to another Device of the same type and index and to
    their bare DeviceType, and are hashable.

    Args:
        type (DeviceType): `mx.cpu` or `mx.gpu`.
        index (int): which device of that type (default 0); a GPU's index is
            its CUDA device number.

    Attributes:
        type (DeviceType): the kind of device.
        index (int): its number among devices of its type.

    >>> mx.Device(mx.cpu), mx.Device(mx.cpu) == mx.cpu, mx.Device(mx.gpu, 1) == mx.gpu
    (Device(cpu, 0), True, True)
    """

    __slots__ = ("type", "index")

    def __init__(self, type: DeviceType, index: int = 0):
        if hasattr(self, "type"):  # `d.__init__(...)` again would change a made Device
            raise TypeError("Device is immutable: it cannot be initialized again.")
        if not isinstance(type, DeviceType):
            raise TypeError(f"[Device] Expected a DeviceType, got {type!r}.")
        try:  # an integer (MLX's `int`): not a float, nor a string of digits
            index = int(operator.index(index))
            if not -(1 << 31) <= index < 1 << 31:  # a C int in MLX
                raise TypeError
        except TypeError:
            raise TypeError(f"[Device] Expected an integer index, got {index!r}.") from None
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name, value):
        raise AttributeError("Device is immutable")

    def __eq__(self, other):
        if isinstance(other, DeviceType):
            return self.type is other
        if isinstance(other, Device):
            return self.type is other.type and self.index == other.index
        return NotImplemented

    def __hash__(self):
        return hash((self.type.value, self.index))

    def __repr__(self):
        return f"Device({self.type.name}, {self.index})"

    def __reduce__(self):
        return (Device, (self.type, self.index))


def as_device(d) -> Device:
    """A Device from a Device or a DeviceType; TypeError for anything else."""
    if isinstance(d, Device):
        return d
    if isinstance(d, DeviceType):
        return Device(d)
    raise TypeError(f"[{called('device')}] Expected a Device or DeviceType, "
                    f"got {type(d).__name__}.")


def device_count(device_type: DeviceType) -> int:
    """How many devices of a type exist.

    Args:
        device_type (DeviceType or Device): the kind of device.

    Returns:
        int: 1 for the CPU; the number of CUDA devices for the GPU (0 without
        CuPy or without a GPU).

    >>> mx.device_count(mx.cpu)
    1
    """
    device_type = as_device(device_type).type
    return 1 if device_type is cpu else gpu_count()


def is_available(device) -> bool:
    """Whether a device exists here.

    Args:
        device (Device or DeviceType): the device.

    Returns:
        bool: True if streams can be made on it.

    >>> mx.is_available(mx.cpu), mx.is_available(mx.Device(mx.cpu, 1))
    (True, False)
    """
    d = as_device(device)
    return d.index < device_count(d.type)


def check_available(d: Device, op: str) -> Device:
    """Raise ValueError naming `op` when the device does not exist here."""
    if d.index < 0 or not is_available(d):
        if d.type is gpu and gpu_count() == 0:
            raise ValueError(f"[{op}] Cannot use {d}: no GPU is available "
                             "(install the 'cuda' extra on a machine with an NVIDIA GPU).")
        raise ValueError(f"[{op}] Cannot use {d}: only {device_count(d.type)} "
                         f"{d.type.name} device(s) exist.")
    return d


# The process-wide default; a `stream()` context overrides it for its thread.
_default_lock = threading.Lock()  # guards _default
_default: Device | None = None


def global_default_device() -> Device:
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Device(gpu) if gpu_count() > 0 else Device(cpu)
    return _default


def set_global_default_device(d) -> None:
    global _default
    d = check_available(as_device(d), "set_default_device")
    with _default_lock:
        _default = d


def device_info(d=None) -> dict:
    """A dict describing a device (the default one if None).

    Args:
        d (Device, DeviceType or None): the device; None for the default device.

    Returns:
        dict: at least `device_name` and `architecture`, and memory sizes where
        known (`memory_size` in bytes; a GPU's entries come from CUDA).

    Raises:
        ValueError: if the device does not exist here.

    >>> sorted(k for k in mx.device_info(mx.cpu) if k in ("architecture", "device_name"))
    ['architecture', 'device_name']
    """
    from .stream import default_device
    d = default_device() if d is None else check_available(as_device(d), "device_info")
    if d.type is gpu:
        return gpu_info(d.index)
    info = {"device_name": _cpu_name(), "architecture": platform.machine(),
            "cores": os.cpu_count() or 1}
    try:
        info["memory_size"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    return info


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
