"""The real-execution backend: run placed graphs with torch on CPU workers or GPUs."""

from placegym.envs.backend.devices import VirtualDevice, parse_devices
from placegym.envs.backend.executor import BackendError, Measurement, TorchExecutor
from placegym.envs.backend.kernels import build_kernels, scale_graph

__all__ = [
    "BackendError",
    "Measurement",
    "TorchExecutor",
    "VirtualDevice",
    "build_kernels",
    "parse_devices",
    "scale_graph",
]
