"""Device specifications of the real backend.

``"cpu#k"``: ``k`` virtual devices, each a CPU worker thread (tensors in host memory; a
transfer is a copy). ``"cuda:i"``: one GPU. ``"cuda:i#k"``: ``k`` virtual devices as
separate streams of GPU ``i``. Several specs join with commas: ``"cuda:0,cuda:1"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["VirtualDevice", "parse_devices"]

_SPEC = re.compile(r"^(cpu|cuda(?::(\d+))?)(?:#(\d+))?$")


@dataclass(frozen=True)
class VirtualDevice:
    """One device of the backend: a torch device plus a lane (a worker / stream) on it."""

    name: str
    torch_device: str
    lane: int

    @property
    def is_cuda(self) -> bool:
        """Whether the device is a CUDA one."""
        return self.torch_device.startswith("cuda")


def parse_devices(spec: str) -> list[VirtualDevice]:
    """Parse ``spec`` (see the module docstring). Raises ``ValueError`` naming the bad part."""
    out: list[VirtualDevice] = []
    for part in [p.strip() for p in str(spec).split(",") if p.strip()]:
        m = _SPEC.match(part)
        if m is None:
            raise ValueError(f"devices: expected 'cpu#k', 'cuda:i' or 'cuda:i#k', got {part!r}")
        base = "cpu" if m.group(1) == "cpu" else f"cuda:{m.group(2) or 0}"
        count = int(m.group(3) or 1)
        if count < 1:
            raise ValueError(f"devices: the count after '#' must be >= 1, got {part!r}")
        for lane in range(count):
            name = base if count == 1 else f"{base}#{lane}"
            out.append(VirtualDevice(name=name, torch_device=base, lane=lane))
    if not out:
        raise ValueError(f"devices: no device in {spec!r}")
    names = [d.name for d in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ValueError(f"devices: {dup!r} is listed twice in {spec!r}")
    return out
