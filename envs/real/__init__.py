"""The real-execution backend: run placed graphs with torch on CPU workers or GPUs."""

from placegym.envs.real.devices import VirtualDevice, parse_devices
from placegym.envs.real.executor import BackendError, Measurement, TorchExecutor
from placegym.envs.real.kernels import build_kernels, scale_graph

__all__ = [
    "BackendError",
    "Measurement",
    "TorchExecutor",
    "VirtualDevice",
    "build_kernels",
    "parse_devices",
    "scale_graph",
]
