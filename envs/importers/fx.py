"""Import any ``torch.nn.Module`` as a :class:`Graph`: torch.fx trace plus shape propagation.

``from_fx(module, example_inputs)`` traces the module with ``torch.fx.symbolic_trace``
(leaf modules such as ``nn.Linear`` or ``nn.MultiheadAttention`` stay single nodes), runs
``ShapeProp`` on the example inputs, and turns every fx node into graph nodes:

- ``placeholder``: an ``input`` node (0 FLOP, ``out_bytes`` = the input tensor), or
  dropped with ``keep_inputs=False`` (its consumers then have no producer for it).
- ``get_attr`` (a parameter or buffer read directly) and computations on parameters only
  (``self.w.t()``): no node; their bytes count as ``param_bytes`` of every consumer.
- ``output``: dropped; the nodes it returns are sinks.
- a call whose result is not a tensor and ``getitem`` on a tuple result
  (``mha(x, x, x)[0]``): folded, their consumers depend on their tensor producers;
  except shape queries (``x.shape``, ``x.size(0)``, ``x.dim()``, …), which are static
  metadata and carry no dependency.
- every other call: one node; view-like ops stay as 0-FLOP nodes.

FLOP per node (``N`` = elements of the output, ``K`` = the contracted extent):
``linear`` ``2·N·in_features`` + ``N`` for a bias; ``matmul``/``mm``/``bmm``/``@``
``2·N·K``; ``addmm``/``baddbmm`` ``2·N·K + N``; ``conv`` ``2·N·(C_in/groups)·∏kernel``
+ ``N`` for a bias; ``einsum`` as :func:`~placegym.envs.workloads.einsum_flops`;
``scaled_dot_product_attention`` ``4·N·S + N·S/E`` (two products and the softmax);
``nn.MultiheadAttention`` its four projections, the two attention products and the
softmax (see :func:`mha_flops`); views, copies, gathers and dropout 0; any other op
1 FLOP per element of its largest tensor operand or result. ``param_bytes`` is the
parameters of a called module plus the folded parameters above. ``out_bytes`` is the
result's bytes (a tuple's summed).

With ``parts > 1`` every ``linear`` / matmul-family node of at least ``min_split_flops``
FLOP whose last output extent is at least ``parts`` is split by output columns into
``parts`` block nodes (``numpy.array_split`` widths; FLOP, output and weight bytes
shared in proportion; a first-operand parameter is whole in every block) plus a
0-FLOP ``concat`` node on the last axis that its consumers read. Totals are unchanged.

Node ``spec``: ``{"kind": "fx", "op": ..., "fx_node": <fx node name>, "args": [{"node":
u}, ..., {"param": shape}, ...], "shape": [...], "dtype": "float32"}`` (a tuple result
has ``"shapes"``); split blocks add ``"columns": [start, stop]``; the concat is
``{"kind": "concat", "axis": -1, ...}``. ``layer`` is 1 + the index of the top-level
submodule a node is traced in (in order of first use), else the largest among its
producers (0 for inputs).

Measured costs (``measure="cpu"``): every node gets a per-kind time ``{"cpu": seconds}``
(``placegym.graph/v2``, :data:`CPU_KIND`, the kind ``placegym calibrate`` gives CPU
devices), timed on this machine's CPU, under ``torch.no_grad``: one more interpretation
of the module on the example inputs calls each fx node's op on its recorded inputs
``warmup`` times, then ``repeats`` times, and keeps the median wall time. An ``input``
node gets 0 (its tensor is there before the step starts); each column block of a split
node gets the whole op's seconds times its share of the columns, and the ``concat`` the
measured ``torch.cat`` of such blocks. Limits: a tiny op's time is mostly Python and
dispatch overhead (microseconds), views and shape-only ops get about that overhead
alone, folded parameter computations are not timed, an in-place op runs repeatedly on
the same tensors, and the figures depend on this machine, its load and torch's thread
count: two runs differ, so treat them as one sample. Devices of other kinds fall back
to the roofline (no default time is stored).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from placegym.envs.core.graph import Graph
from placegym.envs.core.specs import einsum_flops
from placegym.envs.importers._fx_timing import check_cpu, time_nodes

#: The device kind of the times ``measure="cpu"`` stores.
CPU_KIND = "cpu"

# Views, copies and gathers move data but do no arithmetic (dropout: eval-mode identity).
ZERO_FLOP = frozenset(
    {
        *("view", "reshape", "transpose", "permute", "contiguous", "flatten", "unflatten"),
        *("unsqueeze", "squeeze", "expand", "expand_as", "getitem", "t", "chunk", "split"),
        *("unbind", "narrow", "select", "to", "type", "float", "half", "detach", "clone"),
        *("cat", "stack", "embedding", "identity", "dropout", "repeat"),
    }
)
# Non-tensor results known statically from the shapes: they carry no data dependency.
METADATA = frozenset({"getattr", "size", "dim", "numel", "stride"})
MATMUL = frozenset({"matmul", "mm", "bmm"})
ADDMM = frozenset({"addmm", "baddbmm"})
SPLITTABLE = MATMUL | {"linear"}


@dataclass
class _Cost:
    """FLOP and parameters of one fx call; ``split_params`` scale with output columns."""

    op: str
    flops: float
    params: list[tuple[list[int], float]] = field(default_factory=list)
    split_params: list[tuple[list[int], float]] = field(default_factory=list)


def _metas(value: Any) -> list[TensorMetadata]:
    """The tensor metadata inside a ShapeProp result (flattening tuples and lists)."""
    if isinstance(value, TensorMetadata):
        return [value]
    if isinstance(value, tuple | list):
        return [m for v in value for m in _metas(v)]
    return []


def _nbytes(meta: TensorMetadata) -> float:
    return float(math.prod(meta.shape) * meta.dtype.itemsize)


def _shape(arg: Any) -> list[int] | None:
    if isinstance(arg, fx.Node) and isinstance(arg.meta.get("tensor_meta"), TensorMetadata):
        return list(arg.meta["tensor_meta"].shape)
    return None


def _numel(shape: Sequence[int] | None) -> int:
    return math.prod(shape) if shape is not None else 0


def _op_name(node: fx.Node, gm: fx.GraphModule) -> str:
    if node.op == "call_module":
        mod = gm.get_submodule(str(node.target))
        if isinstance(mod, nn.Linear):
            return "linear"
        if isinstance(mod, nn.modules.conv._ConvNd):
            return "conv"
        if isinstance(mod, nn.MultiheadAttention):
            return "multihead_attention"
        return type(mod).__name__.lower()
    if node.op == "call_method":
        return str(node.target)
    name = getattr(node.target, "__name__", str(node.target)).strip("_")
    return "conv" if name in ("conv1d", "conv2d", "conv3d") else name


def mha_flops(mod: nn.MultiheadAttention, q: list[int], k: list[int]) -> float:
    """FLOP of ``nn.MultiheadAttention`` for query ``q`` and key ``k`` shapes.

    ``2·N·L·E·E`` each for the query and output projections, ``2·N·S·E·kdim`` and
    ``2·N·S·E·vdim`` for the key and value projections, ``2·N·L·S·E`` for each of the
    two attention products, ``N·H·L·S`` for the softmax, and one FLOP per element of the
    projection outputs for each bias.
    """
    if mod.batch_first:
        n, length, s = q[0], q[1], k[1]
    else:
        length, n, s = q[0], q[1], k[0]
    e, h = mod.embed_dim, mod.num_heads
    proj = 2 * n * length * e * e * 2 + 2 * n * s * e * (mod.kdim + mod.vdim)
    attn = 4 * n * length * s * e + n * h * length * s
    bias = (n * (length + 2 * s) * e) * (mod.in_proj_bias is not None)
    bias += n * length * e * (mod.out_proj.bias is not None)
    return float(proj + attn + bias)


def _module_cost(node: fx.Node, gm: fx.GraphModule, op: str, out: int) -> _Cost:
    mod: Any = gm.get_submodule(str(node.target))  # a Linear, Conv or MultiheadAttention
    params = [(list(p.shape), float(p.numel() * p.element_size())) for p in mod.parameters()]
    x = _shape(node.args[0]) if node.args else None
    if op == "linear":
        flops = 2 * out * mod.in_features + out * (mod.bias is not None)
        return _Cost(op, float(flops), split_params=params)
    if op == "conv":
        w = mod.weight.shape
        flops = 2 * out * math.prod(w[1:]) + out * (mod.bias is not None)
        return _Cost(op, float(flops), params)
    if op == "multihead_attention":
        key = _shape(node.args[1]) if len(node.args) > 1 else x
        return _Cost(op, mha_flops(mod, x or [], key or x or []), params)
    return _Cost(op, _generic_flops(node, op, out), params)


def _generic_flops(node: fx.Node, op: str, out: int) -> float:
    if op in ZERO_FLOP:
        return 0.0
    return float(max([out, *(_numel(_shape(a)) for a in node.all_input_nodes)]))


def _function_cost(node: fx.Node, op: str, out: int) -> _Cost:
    """FLOP of a ``call_function`` / ``call_method`` node (parameters are added later)."""
    shapes = [_shape(a) for a in node.args]
    if op in MATMUL and shapes and shapes[0]:
        return _Cost(op, float(2 * out * shapes[0][-1]))
    if op in ADDMM and len(shapes) >= 2 and shapes[1]:
        return _Cost(op, float(2 * out * shapes[1][-1] + out))
    bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
    if op == "linear" and shapes and shapes[0]:
        return _Cost(op, float(2 * out * shapes[0][-1] + out * (bias is not None)))
    if op == "conv" and len(shapes) >= 2 and shapes[1]:
        return _Cost(op, float(2 * out * math.prod(shapes[1][1:]) + out * (bias is not None)))
    if op == "einsum" and isinstance(node.args[0], str):
        operands = [s for s in shapes[1:] if s is not None]
        return _Cost(op, einsum_flops(node.args[0], operands))
    if op == "scaled_dot_product_attention" and len(shapes) >= 2 and shapes[1]:
        s, e = shapes[1][-2], shapes[1][-1]
        return _Cost(op, float(4 * out * s + out * s // e))
    return _Cost(op, _generic_flops(node, op, out))


class _FxImporter:
    """Walks a shape-propagated ``GraphModule`` once, accumulating graph nodes and edges."""

    def __init__(
        self, gm: fx.GraphModule, parts: int, min_split_flops: float, keep_inputs: bool
    ) -> None:
        self.gm = gm
        self.parts = parts
        self.min_split = min_split_flops
        self.keep_inputs = keep_inputs
        self.cols: dict[str, list[Any]] = {k: [] for k in ("flops", "out", "param", "layer")}
        self.ops: list[str] = []
        self.specs: list[dict[str, Any]] = []
        self.edges: list[tuple[int, int]] = []
        self.ids: dict[fx.Node, list[int]] = {}  # graph nodes an fx value depends on
        self.params: dict[fx.Node, list[tuple[list[int], float]]] = {}  # folded parameters
        self.scopes: dict[str, int] = {}
        self.timed: dict[int, tuple[fx.Node, float]] = {}  # node: (fx node, share)
        self.concats: dict[int, tuple[fx.Node, list[int]]] = {}  # node: (fx node, widths)

    def measure(self, inputs: Sequence[Any], warmup: int, repeats: int) -> list[float]:
        """Seconds of each graph node on this CPU (module docstring)."""
        widths = dict(self.concats.values())
        fx_nodes = {node for node, _ in self.timed.values()}
        ops, cats = time_nodes(self.gm, inputs, fx_nodes, widths, warmup=warmup, repeats=repeats)
        out = [0.0] * len(self.ops)
        for v, (node, share) in self.timed.items():
            out[v] = ops[node] * share
        for v, (node, _) in self.concats.items():
            out[v] = cats[node]
        return out

    def run(self, name: str) -> Graph:
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node)
            elif node.op == "get_attr":
                value = functools.reduce(getattr, str(node.target).split("."), self.gm)
                if isinstance(value, torch.Tensor):
                    nbytes = float(value.numel() * value.element_size())
                    self.params[node] = [(list(value.shape), nbytes)]
                self.ids[node] = []
            elif node.op != "output":
                self._call(node)
        return Graph(
            flops=self.cols["flops"],
            out_bytes=self.cols["out"],
            param_bytes=self.cols["param"],
            layer=self.cols["layer"],
            op=tuple(self.ops),
            spec=tuple(self.specs),
            edges=self.edges,
            name=name,
        )

    def _add(self, op: str, cost: tuple[float, float, float], layer: int, spec: dict) -> int:
        """Append a node with ``(flops, out_bytes, param_bytes)``; edges from spec args."""
        v = len(self.ops)
        for key, value in zip(("flops", "out", "param"), cost):
            self.cols[key].append(value)
        self.cols["layer"].append(layer)
        self.ops.append(op)
        self.specs.append(spec)
        self.edges.extend((a["node"], v) for a in spec.get("args", ()) if "node" in a)
        return v

    def _placeholder(self, node: fx.Node) -> None:
        metas = _metas(node.meta.get("tensor_meta"))
        if not (self.keep_inputs and metas):
            self.ids[node] = []
            return
        spec = {"kind": "input", "fx_node": node.name, **_shape_spec(metas)}
        out = sum(_nbytes(m) for m in metas)
        self.ids[node] = [self._add("input", (0.0, out, 0.0), 0, spec)]

    def _layer(self, node: fx.Node, producers: list[int]) -> int:
        stack = node.meta.get("nn_module_stack")
        if stack:
            top = str(next(iter(stack))).split(".")[0]
            return 1 + self.scopes.setdefault(top, len(self.scopes))
        return max((self.cols["layer"][u] for u in producers), default=0)

    def _call(self, node: fx.Node) -> None:
        inputs = node.all_input_nodes
        producers = sorted({u for i in inputs for u in self.ids.get(i, [])})
        metas = _metas(node.meta.get("tensor_meta"))
        if not metas or _is_tuple_getitem(node):
            # a non-tensor value or an alias into a tuple; shapes are static metadata
            metadata = not metas and _op_name(node, self.gm) in METADATA
            self.ids[node] = [] if metadata else producers
            return
        if inputs and all(i in self.params for i in inputs):
            self.params[node] = [(list(m.shape), _nbytes(m)) for m in metas]
            return
        op = _op_name(node, self.gm)
        cost = self._cost(node, op, _numel(metas[0].shape))
        base = {"kind": "fx", "op": op, "fx_node": node.name, **_shape_spec(metas)}
        layer = self._layer(node, producers)
        width = metas[0].shape[-1] if metas[0].shape else 0
        if (
            self.parts > 1
            and op in SPLITTABLE
            and len(metas) == 1
            and width >= self.parts
            and cost.flops >= self.min_split
        ):
            out = _nbytes(metas[0])
            self.ids[node] = [self._add_split(node, cost, producers, base, layer, out)]
            return
        params = cost.params + cost.split_params
        spec = {**base, "args": _args(producers, params)}
        out_bytes = sum(_nbytes(m) for m in metas)
        total = sum(b for _, b in params)
        self.ids[node] = [self._add(op, (cost.flops, out_bytes, total), layer, spec)]
        self.timed[self.ids[node][0]] = (node, 1.0)

    def _cost(self, node: fx.Node, op: str, out: int) -> _Cost:
        """FLOP and parameters of a call with ``out`` result elements, folded params included."""
        if node.op == "call_module":
            cost = _module_cost(node, self.gm, op, out)
        else:
            cost = _function_cost(node, op, out)
        for i in node.all_input_nodes:
            if i in self.params:
                # a linear's weight, and a matmul's second operand, split with the columns
                split = op == "linear" or (op in MATMUL and node.args[1:2] == (i,))
                (cost.split_params if split else cost.params).extend(self.params[i])
        return cost

    def _add_split(
        self,
        node: fx.Node,
        cost: _Cost,
        producers: list[int],
        base: dict,
        layer: int,
        out_bytes: float,
    ) -> int:
        """``parts`` column blocks of a matmul-family node plus their ``concat``."""
        width = base["shape"][-1]
        blocks = []
        widths = []
        start = 0
        for j in range(self.parts):
            n = width // self.parts + (j < width % self.parts)  # numpy.array_split widths
            frac = n / width
            params = [
                *cost.params,
                *(_block_param(s, b, cost.op, n) for s, b in cost.split_params),
            ]
            spec = {
                **base,
                "shape": [*base["shape"][:-1], n],
                "columns": [start, start + n],
                "args": _args(producers, params),
            }
            start += n
            nbytes = (cost.flops * frac, out_bytes * frac, sum(b for _, b in params))
            blocks.append(self._add(cost.op, nbytes, layer, spec))
            widths.append(n)
            self.timed[blocks[-1]] = (node, frac)
        spec = {
            "kind": "concat",
            "axis": -1,
            "args": [{"node": u} for u in blocks],
            "shape": base["shape"],
            "dtype": base["dtype"],
        }
        concat = self._add("concat", (0.0, out_bytes, 0.0), layer, spec)
        self.concats[concat] = (node, widths)
        return concat


def _block_param(shape: list[int], nbytes: float, op: str, n: int) -> tuple[list[int], float]:
    """The slice of a weight that one column block of ``n`` output features needs."""
    if not shape:
        return shape, nbytes
    axis = 0 if op == "linear" else len(shape) - 1
    block = list(shape)
    block[axis] = n
    return block, nbytes * n / shape[axis]


def _args(producers: list[int], params: list[tuple[list[int], float]]) -> list[dict]:
    return [*({"node": u} for u in producers), *({"param": s} for s, _ in params)]


def _shape_spec(metas: list[TensorMetadata]) -> dict[str, Any]:
    dtype = str(metas[0].dtype).removeprefix("torch.")
    if len(metas) == 1:
        return {"shape": list(metas[0].shape), "dtype": dtype}
    return {
        "shape": list(metas[0].shape),
        "shapes": [list(m.shape) for m in metas],
        "dtype": dtype,
    }


def _is_tuple_getitem(node: fx.Node) -> bool:
    if node.target is not operator.getitem or not node.args:
        return False
    src = node.args[0]
    return isinstance(src, fx.Node) and isinstance(src.meta.get("tensor_meta"), tuple | list)


def from_fx(
    module: nn.Module,
    example_inputs: torch.Tensor | Sequence[torch.Tensor],
    *,
    parts: int = 1,
    min_split_flops: float = 0.0,
    keep_inputs: bool = True,
    name: str | None = None,
    measure: str | None = None,
    warmup: int = 3,
    repeats: int = 10,
) -> Graph:
    """Trace ``module`` and build its :class:`Graph` (see the module docstring).

    Args:
        module: any ``torch.nn.Module`` that ``torch.fx.symbolic_trace`` can trace (or a
            ``GraphModule``).
        example_inputs: positional inputs of ``forward`` (a single tensor is allowed);
            they fix every shape.
        parts: column blocks per large linear / matmul (1 = no splitting).
        min_split_flops: only nodes of at least this many FLOP are split.
        keep_inputs: keep placeholders as 0-FLOP ``input`` nodes.
        name: the graph's name (default: the module's class name).
        measure: None (default: no times, the graph of the rules above) or ``"cpu"``:
            time every node on this machine's CPU and store ``{"cpu": seconds}`` per
            node (module docstring: what the figures are and are not).
        warmup: with ``measure``: untimed calls of each op before timing it (>= 0).
        repeats: with ``measure``: timed calls of each op, of which the median is kept
            (>= 1).

    Raises:
        ValueError: ``parts`` < 1, ``measure`` not None or ``"cpu"``, ``warmup`` < 0,
            ``repeats`` < 1, a module fx cannot trace, inputs it cannot run on, or with
            ``measure="cpu"`` an input, parameter or buffer not on the CPU.
    """
    if parts < 1:
        raise ValueError(f"parts: must be >= 1, got {parts}")
    if measure not in (None, CPU_KIND):
        raise ValueError(f"measure: expected None or {CPU_KIND!r}, got {measure!r}")
    for key, value, lo in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise ValueError(f"{key}: must be an integer >= {lo}, got {value!r}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    label = type(module).__name__
    try:
        gm = module if isinstance(module, fx.GraphModule) else fx.symbolic_trace(module)
    except Exception as e:  # fx raises TraceError, TypeError, NotImplementedError, ...
        raise ValueError(f"module: torch.fx cannot trace {label}: {e}") from e
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*example_inputs)
    except Exception as e:  # any runtime error of the user's forward on these inputs
        raise ValueError(f"example_inputs: {label} failed on them: {e}") from e
    importer = _FxImporter(gm, parts, min_split_flops, keep_inputs)
    graph = importer.run(name or label)
    if measure is None:
        return graph
    check_cpu(gm, example_inputs)
    seconds = importer.measure(example_inputs, warmup, repeats)
    return dataclasses.replace(graph, kind_time={CPU_KIND: np.array(seconds)})
