"""Machine tooling, apart from training and benchmarking.

- :mod:`~placegym.train.machine.gpu_check`: the checks run on a CUDA machine without
  network (``make gpu-check``);
- :mod:`~placegym.train.machine.wheelhouse`: the requirements such a machine needs as
  wheels (``make wheelhouse``).
"""
