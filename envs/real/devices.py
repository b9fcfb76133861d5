"""Device specifications of the real backend.

- ``"cpu#k"``: ``k`` virtual devices, each a CPU worker thread (tensors in host memory; a
  transfer is a copy). Independent devices as long as the machine has a free core per
  worker.
- ``"cuda:i"``: one GPU. Several GPUs (``"cuda:0,cuda:1"``) are independent devices.
- ``"cuda:i#k"``: ``k`` virtual devices as separate streams of GPU ``i``. They are *not*
  independent: kernels of the streams share the GPU's SMs and memory bandwidth, so driven
  at once each runs at about ``1/k`` of its speed alone.
- ``"cuda:i%N"``: GPU ``i`` restricted to ``N`` SMs: its kernels run on a stream of a CUDA
  green context of ``N`` SMs (``torch.cuda.green_contexts``), a smaller GPU. Copies are
  not restricted. Every green context is carved from the whole device, so partitions of
  one GPU may overlap (on an H200 four 32-SM partitions driven at once time-sliced): one
  partition per GPU is meaningful (e.g. ``"cuda:0%16,cpu#2"``), several share hardware.
- Joined with commas, kinds mix: ``"cuda:0,cpu#2"`` is a heterogeneous system of one GPU
  and two CPU workers, with real host↔device copies between them.

:func:`shared_hardware` names the groups of devices that share hardware by construction
(streams or partitions of one GPU, more CPU workers than cores); calibration also measures
it (:func:`placegym.envs.real.calibrate.measure_sharing`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["VirtualDevice", "device_kind", "open_stream", "parse_devices", "shared_hardware"]

_SPEC = re.compile(r"^(cpu|cuda(?::(\d+))?)(?:%(\d+))?(?:#(\d+))?$")

#: Green contexts by (GPU index, SMs), created once and kept for the life of the process:
#: a context that is garbage collected is destroyed with the streams that use it.
_GREEN_CONTEXTS: dict[tuple[int, int], Any] = {}


@dataclass(frozen=True)
class VirtualDevice:
    """One device of the backend: a torch device plus a lane (a worker / stream) on it;
    ``sms`` is the SM count of a green-context partition (None: the whole GPU)."""

    name: str
    torch_device: str
    lane: int
    sms: int | None = None

    @property
    def is_cuda(self) -> bool:
        """Whether the device is a CUDA one."""
        return self.torch_device.startswith("cuda")

    @property
    def index(self) -> int:
        """The GPU index (0 for the CPU)."""
        return int(self.torch_device.split(":")[1]) if self.is_cuda else 0


def parse_devices(spec: str) -> list[VirtualDevice]:
    """Parse ``spec`` (see the module docstring). Raises ``ValueError`` naming the bad part."""
    out: list[VirtualDevice] = []
    for part in [p.strip() for p in str(spec).split(",") if p.strip()]:
        m = _SPEC.match(part)
        if m is None:
            raise ValueError(
                f"devices: expected 'cpu#k', 'cuda:i', 'cuda:i#k' or 'cuda:i%N', got {part!r}"
            )
        base = "cpu" if m.group(1) == "cpu" else f"cuda:{m.group(2) or 0}"
        count = int(m.group(4) or 1)
        sms = None if m.group(3) is None else int(m.group(3))
        if count < 1:
            raise ValueError(f"devices: the count after '#' must be >= 1, got {part!r}")
        if sms is not None and (base == "cpu" or m.group(4) is not None or sms < 1):
            raise ValueError(
                f"devices: an SM partition is 'cuda:i%N' with N >= 1 and no '#k', got {part!r}"
            )
        for lane in range(count):
            name = base if count == 1 else f"{base}#{lane}"
            name = name if sms is None else f"{base}%{sms}"
            out.append(VirtualDevice(name=name, torch_device=base, lane=lane, sms=sms))
    if not out:
        raise ValueError(f"devices: no device in {spec!r}")
    names = [d.name for d in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ValueError(f"devices: {dup!r} is listed twice in {spec!r}")
    return out


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def shared_hardware(devices: list[VirtualDevice], cores: int | None = None) -> list[str]:
    """One line per group of devices that share hardware by construction: several
    streams or partitions of one GPU, or more CPU workers than usable ``cores``."""
    cores = usable_cores() if cores is None else cores
    notes = []
    gpus: dict[str, list[str]] = {}
    for d in devices:
        if d.is_cuda:
            gpus.setdefault(d.torch_device, []).append(d.name)
    for gpu, names in gpus.items():
        if len(names) > 1:
            notes.append(
                f"{', '.join(names)} share {gpu} (streams or SM partitions of one GPU run "
                f"their kernels on the same SMs: not independent devices)"
            )
    cpus = [d.name for d in devices if not d.is_cuda]
    if len(cpus) > cores:
        notes.append(
            f"{', '.join(cpus)}: {len(cpus)} CPU workers on {cores} usable cores "
            f"(they time-share cores: not independent devices)"
        )
    return notes


def device_kind(device: VirtualDevice) -> str:
    """The device's class for profiled costs: ``"cpu"``, ``"cuda:<GPU name>"``, with
    ``"%N"`` for an N-SM partition. Devices of one kind run a kernel alike."""
    if not device.is_cuda:
        return "cpu"
    import torch

    kind = f"cuda:{torch.cuda.get_device_name(device.index)}"
    return kind if device.sms is None else f"{kind}%{device.sms}"


def open_stream(device: VirtualDevice, *, compute: bool):
    """A new CUDA stream on ``device`` (None on the CPU). A partition's compute stream
    comes from its green context (the context is kept alive, see the module docstring)."""
    if not device.is_cuda:
        return None
    import torch

    if compute and device.sms is not None:
        key = (device.index, device.sms)
        if key not in _GREEN_CONTEXTS:
            from torch.cuda.green_contexts import GreenContext

            _GREEN_CONTEXTS[key] = GreenContext.create(num_sms=device.sms, device_id=device.index)
        return _GREEN_CONTEXTS[key].Stream()
    return torch.cuda.Stream(device=device.torch_device)
