"""Real ``torch.nn`` modules traced with :func:`~placegym.envs.importers.fx.from_fx` for the
held-out test split of ``generalize-v0``: graphs no generator in placegym produces.

- :class:`GptBlock`: a pre-norm GPT block: LayerNorm, fused QKV projection, causal
  attention computed per head group (``q·kᵀ``, scale, mask, softmax, ``·v``), output
  projection, residual; LayerNorm, MLP ``d → 4d → d`` with GELU, residual.
- :class:`ResNetStage`: a ResNet stage of basic blocks (conv3×3-BN-ReLU-conv3×3-BN plus
  the identity, the first block strided with a 1×1 projection shortcut), run on
  ``micro_batches`` slices of the batch (data-parallel branches sharing the weights).
- :class:`UNetBlock`: a two-level U-Net: double conv, max-pool, double conv
  (bottleneck), transposed-conv upsampling, concatenation with the skip, double conv;
  also on ``micro_batches`` slices.
- :class:`MoeLayer`: an expert-choice mixture-of-experts layer (Zhou et al. 2022): router
  and softmax over experts, each expert takes its ``capacity`` highest-scoring tokens
  (top-k over tokens), runs its GELU MLP on them, scales by the router weight and adds
  the result back (``index_add``); shapes are static, so fx traces it.

:func:`trace_model` builds a module *on the meta device* (no memory, no arithmetic:
shape propagation only) and traces it with ``parts`` column blocks per large linear /
matmul, so the graph's FLOP and bytes are those of the real sizes below. Everything is
float32 and deterministic (no weights are drawn).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from placegym.envs.core.graph import Graph

__all__ = ["MODELS", "GptBlock", "MoeLayer", "ResNetStage", "UNetBlock", "trace_model"]


class GptBlock(nn.Module):
    """Pre-norm GPT block; attention is computed per group of ``heads // groups`` heads."""

    def __init__(self, d_model: int, heads: int, groups: int, seq: int) -> None:
        super().__init__()
        if d_model % heads or heads % groups:
            raise ValueError(f"heads: {heads} must divide d_model and be a multiple of groups")
        self.heads, self.groups, self.head_dim = heads, groups, d_model // heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.up, self.act, self.down = (
            nn.Linear(d_model, 4 * d_model),
            nn.GELU(),
            nn.Linear(4 * d_model, d_model),
        )
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, seq, d_model)`` → the same shape."""
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        width = d // self.groups
        outs = []
        for g in range(self.groups):
            cols = slice(g * width, (g + 1) * width)
            qg = q[..., cols].reshape(b, s, -1, self.head_dim).transpose(1, 2)
            kg = k[..., cols].reshape(b, s, -1, self.head_dim).transpose(1, 2)
            vg = v[..., cols].reshape(b, s, -1, self.head_dim).transpose(1, 2)
            att = (qg @ kg.transpose(-2, -1)) * self.head_dim**-0.5
            att = att.masked_fill(self.mask, float("-inf")).softmax(dim=-1)
            outs.append((att @ vg).transpose(1, 2).reshape(b, s, width))
        x = x + self.proj(torch.cat(outs, dim=-1))
        return x + self.down(self.act(self.up(self.ln2(x))))


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1, self.bn2 = nn.BatchNorm2d(cout), nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.short is None else self.short(x)))


class ResNetStage(nn.Module):
    """``blocks`` basic blocks ``cin → cout`` (the first strided by 2), per micro-batch."""

    def __init__(self, cin: int, cout: int, blocks: int, micro_batches: int) -> None:
        super().__init__()
        self.micro_batches = micro_batches
        self.blocks = nn.Sequential(
            *(
                _BasicBlock(cin if i == 0 else cout, cout, 2 if i == 0 else 1)
                for i in range(blocks)
            )
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, cin, h, w)`` → ``(batch, cout, h/2, w/2)``."""
        parts = x.chunk(self.micro_batches, dim=0)
        return torch.cat([self.blocks(parts[i]) for i in range(self.micro_batches)], dim=0)


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1),
        nn.ReLU(),
    )


class UNetBlock(nn.Module):
    """Encoder, bottleneck and decoder of one U-Net level with its skip, per micro-batch."""

    def __init__(self, channels: int, micro_batches: int) -> None:
        super().__init__()
        c = channels
        self.micro_batches = micro_batches
        self.enc, self.mid = _double_conv(c, c), _double_conv(c, 2 * c)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.dec = _double_conv(2 * c, c)

    def _one(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.enc(x)
        return self.dec(torch.cat([skip, self.up(self.mid(self.pool(skip)))], dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, channels, h, w)`` → the same shape."""
        parts = x.chunk(self.micro_batches, dim=0)
        return torch.cat([self._one(parts[i]) for i in range(self.micro_batches)], dim=0)


class MoeLayer(nn.Module):
    """Expert-choice MoE: each of ``experts`` GELU MLPs takes ``capacity`` tokens."""

    def __init__(self, d_model: int, hidden: int, experts: int, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.router = nn.Linear(d_model, experts, bias=False)
        self.up = nn.ModuleList(nn.Linear(d_model, hidden) for _ in range(experts))
        self.down = nn.ModuleList(nn.Linear(hidden, d_model) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(tokens, d_model)`` → the same shape (residual included)."""
        probs = self.router(x).softmax(dim=-1)
        out = torch.zeros_like(x)
        for e, (up, down) in enumerate(zip(self.up, self.down)):
            weight, tokens = probs[:, e].topk(self.capacity)
            h = down(nn.functional.gelu(up(x.index_select(0, tokens))))
            out = out.index_add(0, tokens, h * weight.unsqueeze(-1))
        return x + out


def _gpt(batch: int = 1, seq: int = 1024, d_model: int = 1024, heads: int = 16, groups: int = 4):
    return GptBlock(d_model, heads, groups, seq), (torch.randn(batch, seq, d_model),)


def _resnet(batch: int = 32, size: int = 56, cin: int = 64, cout: int = 128, blocks: int = 2):
    module = ResNetStage(cin, cout, blocks, micro_batches=4)
    return module, (torch.randn(batch, cin, size, size),)


def _unet(batch: int = 8, size: int = 128, channels: int = 64, micro_batches: int = 4):
    return UNetBlock(channels, micro_batches), (torch.randn(batch, channels, size, size),)


def _moe(tokens: int = 2048, d_model: int = 1024, hidden: int = 4096, experts: int = 8):
    capacity = 2 * tokens // experts  # two experts per token on average
    return MoeLayer(d_model, hidden, experts, capacity), (torch.randn(tokens, d_model),)


#: name -> builder of ``(module, example inputs)``; keyword arguments are sizes.
MODELS: dict[str, Callable[..., tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "gpt_block": _gpt,
    "resnet_stage": _resnet,
    "unet_block": _unet,
    "moe_layer": _moe,
}


def trace_model(name: str, *, parts: int = 4, min_split_flops: float = 1e8, **sizes: Any) -> Graph:
    """The graph of model ``name`` (see :data:`MODELS`) traced on the meta device; the last
    few traces are cached (graphs are immutable).

    Args:
        name: a key of :data:`MODELS`.
        parts: column blocks per large linear / matmul
            (see :func:`~placegym.envs.importers.fx.from_fx`).
        min_split_flops: only linears / matmuls of at least this many FLOP are split.
        sizes: the builder's size arguments (batch, seq, d_model, ...).

    Raises:
        ValueError: an unknown model name or size argument.
    """
    return _trace(name, parts, min_split_flops, tuple(sorted(sizes.items())))


@functools.lru_cache(maxsize=16)
def _trace(name: str, parts: int, min_split_flops: float, items: tuple) -> Graph:
    from placegym.envs.importers.fx import from_fx

    sizes = dict(items)
    if name not in MODELS:
        raise ValueError(f"model: unknown name {name!r} (models: {', '.join(MODELS)})")
    try:
        with torch.device("meta"):
            module, inputs = MODELS[name](**sizes)
    except TypeError as e:
        raise ValueError(f"model {name}: {e}") from None
    label = "-".join([name, *(f"{k}{v}" for k, v in sorted(sizes.items()))])
    return from_fx(module, inputs, parts=parts, min_split_flops=min_split_flops, name=label)
