"""PT2E quantization (``XNNPACKQuantizer``, ``VulkanQuantizer``) and the qparam flow of the converted graph.

The recipe is ExecuTorch's documented one (``torch.export.export(...).module()``,
``prepare_pt2e`` with ``XNNPACKQuantizer().set_global(get_symmetric_quantization_config())``,
calibration, ``convert_pt2e``; torchao's ``torchao.quantization.pt2e.quantize_pt2e``
is what executorch 1.5.1's quantizer is written against). ET-VK's static-int8 ops
(``et_vk.q8ta_*``) come from ``XNNPACKQuantizer`` with per-channel weights, as ET-VK's own
tests quantize (``backends/vulkan/test/utils.py::get_exported_graph``): ``VulkanQuantizer``
annotates ``linear`` only, weight-only or with dynamic activations. :func:`qparam_flow`
reads the converted graph's ``quantize_per_tensor``/``dequantize_per_tensor``
nodes around every qparam-preserving op and every ``cat``: what the
``cat_qparams`` rule checks, and what XNNPACK checks at runtime init
(``xnn_subgraph_check_quantization_parameter_matches``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import operator
from typing import Any, Callable, Iterator, Sequence

import torch

QPARAM_PRESERVING_OPS: frozenset[str] = frozenset({
    # layout: XNNPACK static_transpose / static_reshape / copy only move bytes
    "aten.transpose.int", "aten.transpose_copy.int", "aten.t.default", "aten.t_copy.default",
    "aten.swapaxes.default", "aten.permute.default", "aten.permute_copy.default",
    "aten.flatten.using_ints", "aten.view.default", "aten.view_copy.default", "aten.reshape.default",
    "aten._unsafe_view.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze_copy.dim",
    "aten.squeeze_copy.dims", "aten.unsqueeze.default", "aten.unsqueeze_copy.default", "aten.clone.default",
    "aten.pixel_shuffle.default", "aten.pixel_unshuffle.default",
    # static_slice
    "aten.slice.Tensor", "aten.slice_copy.Tensor",
    # max_pooling_2d, clamp, static_resize_bilinear_2d
    "aten.max_pool2d.default", "aten.relu.default", "aten.hardtanh.default", "aten.hardtanh_.default",
    "aten.clamp.default", "aten.upsample_bilinear2d.vec",
})
"""Ops whose XNNPACK node requires identical input and output qparams (``aten.<name>.<overload>``)."""

CAT_OPS: frozenset[str] = frozenset({"aten.cat.default", "aten.concat.default"})

_QUANTIZE = "quantize_per_tensor"
_DEQUANTIZE = "dequantize_per_tensor"


def quantize_pt2e(model: torch.nn.Module, inputs: Sequence[torch.Tensor] | tuple, quantizer: Any
                  ) -> torch.fx.GraphModule:
    """Export ``model``, annotate it with ``quantizer``, calibrate once on ``inputs``, convert (constants folded)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    inputs = tuple(inputs)
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    with torch.no_grad():
        prepared(*inputs)
    return convert_pt2e(prepared)


def quantize_pt2e_xnnpack(model: torch.nn.Module, inputs: Sequence[torch.Tensor] | tuple, *,
                          per_channel: bool = False) -> torch.fx.GraphModule:
    """Quantize ``model`` with PT2E and ``XNNPACKQuantizer`` (symmetric, static per-tensor activations).

    The ``recipe(model, inputs)`` of ``RECIPES["pt2e-xnnpack"]`` (per-tensor weights) and of
    ``RECIPES["pt2e-xnnpack-perchannel"]`` (per-channel weights: ET-VK's static-int8 recipe):
    export, annotate, calibrate on ``inputs`` once, convert (constants folded). Activations are
    int8 affine per tensor (``[-128, 127]``, zero points), weights int8 symmetric (``[-127, 127]``).

    Args:
        model (torch.nn.Module): the float module, in eval mode.
        inputs (tuple): example inputs, used to export and to calibrate.
        per_channel (bool): per-output-channel weight scales (else one scale per weight).

    Returns:
        torch.fx.GraphModule: the converted module (``quantize``/``dequantize_per_tensor`` nodes
        around each quantized op), ready for ``torch.export.export`` and ``XnnpackPartitioner``.

    Example::

        >>> from vkdiff.cases.vit import ViTTokenPath
        >>> x = (torch.randn(1, 3, 32, 32),)
        >>> converted = quantize_pt2e_xnnpack(ViTTokenPath().eval(), x)  # doctest: +SKIP
    """
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (XNNPACKQuantizer,
                                                                         get_symmetric_quantization_config)

    memoise_xnnpack_patterns()
    config = get_symmetric_quantization_config(is_per_channel=per_channel)
    return quantize_pt2e(model, inputs, XNNPACKQuantizer().set_global(config))


@functools.lru_cache(maxsize=None)
def memoise_xnnpack_patterns() -> None:
    """Memoise the conv-bn pattern graphs ``XNNPACKQuantizer.annotate`` exports on every call (12 strict exports,
    ~7 s on 2 cores), keyed by the pattern's code, closure and example input shapes; each call gets its own copy
    (the matcher edits the pattern graph). Unkeyable patterns are exported as before."""
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils

    export = utils._get_aten_graph_module_for_pattern
    graphs: dict[tuple, Any] = {}

    def memoised(pattern: Callable, example_inputs: tuple, is_cuda: bool = False, **kwargs):
        key = _pattern_key(pattern, example_inputs, is_cuda, kwargs)
        if key is None:
            return export(pattern, example_inputs, is_cuda, **kwargs)
        if key not in graphs:
            graphs[key] = export(pattern, example_inputs, is_cuda, **kwargs)
        return copy.deepcopy(graphs[key])

    utils._get_aten_graph_module_for_pattern = memoised


def _pattern_key(pattern: Callable, example_inputs: tuple, is_cuda: bool, kwargs: dict) -> tuple | None:
    """What a pattern's exported graph depends on: its function's code and closure, input shapes and dtypes."""
    fn = getattr(pattern, "fn", pattern)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        closure = tuple(cell.cell_contents for cell in fn.__closure__ or ())
        inputs = tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in example_inputs)
        key = (code, closure, inputs, is_cuda, tuple(sorted(kwargs.items())))
        hash(key)
    except (TypeError, ValueError):
        return None
    return key


def quantize_pt2e_vulkan(model: torch.nn.Module, inputs: Sequence[torch.Tensor] | tuple, *, dynamic: bool = False,
                         weight_bits: int = 8) -> torch.fx.GraphModule:
    """Quantize ``model`` with PT2E and ``VulkanQuantizer``: the ``linear`` weights, per channel.

    ``VulkanQuantizer`` annotates ``aten.linear`` and nothing else (convs, adds, cats stay float);
    its one config, ``get_symmetric_quantization_config(is_dynamic, weight_bits)``, quantizes
    weights int8 per-channel symmetric (``[-128, 127]``; ``[-8, 7]`` at 4 bits) and, when
    ``dynamic``, the linear's input with a per-tensor ``choose_qparams`` at run time. It has
    no static-activation and no asymmetric option.

    Args:
        model (torch.nn.Module): the float module, in eval mode.
        inputs (tuple): example inputs, used to export (and to run the observers once).
        dynamic (bool): quantize linear inputs dynamically (8-bit, per tensor).
        weight_bits (int): 8 or 4.
    """
    from executorch.backends.vulkan.quantizer.vulkan_quantizer import (VulkanQuantizer,
                                                                       get_symmetric_quantization_config)

    config = get_symmetric_quantization_config(is_dynamic=dynamic, weight_bits=weight_bits)
    return quantize_pt2e(model, inputs, VulkanQuantizer().set_global(config))


UNFIXED_SHARED_OPS = ("transpose.int", "reshape.default", "slice.Tensor", "dropout.default", "dropout_.default")
"""aten ops missing from ``_is_share_obs_or_fq_op`` before executorch PR #20280 (as of commit 00f16074)."""


@contextlib.contextmanager
def unfixed_cat_annotation() -> Iterator[bool]:
    """Make ``XNNPACKQuantizer`` annotate cats as before executorch PR #20280 (the ViT token-path bug).

    Before the fix, a cat's shared qparams were anchored on its first input (a ViT's class
    token) and transpose/reshape did not propagate shared qparams. Yields True when it
    patched executorch's ``xnnpack_quantizer_utils`` (restored on exit), False when the
    installed executorch has no fix to undo (it then behaves this way already).
    """
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils

    names = ("_get_cat_qparam_source", "_is_share_obs_or_fq_op")
    if not all(hasattr(utils, name) for name in names):
        yield False
        return
    saved = {name: getattr(utils, name) for name in names}
    removed = {getattr(getattr(torch.ops.aten, op.split(".")[0]), op.split(".")[1]) for op in UNFIXED_SHARED_OPS}
    shared = saved["_is_share_obs_or_fq_op"]
    utils._get_cat_qparam_source = lambda inputs: inputs[0]
    utils._is_share_obs_or_fq_op = lambda op: shared(op) and op not in removed
    try:
        yield True
    finally:
        for name, value in saved.items():
            setattr(utils, name, value)


def quantize_pt2e_xnnpack_unfixed(model: torch.nn.Module, inputs: Sequence[torch.Tensor] | tuple, *,
                                  per_channel: bool = False) -> torch.fx.GraphModule:
    """:func:`quantize_pt2e_xnnpack` under :func:`unfixed_cat_annotation`: the recipe of an ``expect_fail`` case."""
    with unfixed_cat_annotation():
        return quantize_pt2e_xnnpack(model, inputs, per_channel=per_channel)


def op_name(target: Any) -> str:
    """``aten.transpose.int`` style name of a node target (``str(target)`` for other callables)."""
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return str(schema.name).replace("::", ".") + "." + (target._overloadname or "default")
    return getattr(target, "__name__", None) or str(target)


def _is(node: Any, kind: str) -> bool:
    """Whether ``node`` calls ``<namespace>.<kind>.<overload>`` (``kind`` e.g. ``dequantize_per_tensor``)."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    parts = op_name(node.target).split(".")
    return len(parts) >= 2 and parts[-2] == kind


def _value(graph_module: torch.fx.GraphModule, arg: Any) -> Any:
    """A qparam argument as a Python number (``.tensor`` overloads pass ``get_attr`` nodes)."""
    if isinstance(arg, torch.fx.Node):
        if arg.op != "get_attr":
            return None
        arg = operator.attrgetter(arg.target)(graph_module)
    if isinstance(arg, torch.Tensor):
        return arg.item() if arg.numel() == 1 else arg.tolist()
    if isinstance(arg, torch.dtype):
        return str(arg).replace("torch.", "")
    return arg


def qparams(graph_module: torch.fx.GraphModule, node: torch.fx.Node) -> dict[str, Any]:
    """``{"scale", "zero_point", "quant_min", "quant_max", "dtype", "node"}`` of a (de)quantize_per_tensor node.

    Arguments are read by the names of the node's own schema (``quantized_decomposed``'s).
    """
    names = ("scale", "zero_point", "quant_min", "quant_max", "dtype")
    bound = {arg.name: value for arg, value in zip(node.target._schema.arguments, node.args)} | dict(node.kwargs)
    out = {name: _value(graph_module, bound[name]) for name in names if name in bound}
    out["node"] = node.name
    return out


def _input_qparams(graph_module, arg) -> dict[str, Any] | None:
    return qparams(graph_module, arg) if _is(arg, _DEQUANTIZE) else None


def _output_qparams(graph_module, node: torch.fx.Node) -> dict[str, Any] | None:
    for user in node.users:
        if _is(user, _QUANTIZE) and user.args[0] is node:
            return qparams(graph_module, user)
    return None


def _activations(graph_module: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """Nodes computed from a graph input (activations), as opposed to constants only (graph order is topological)."""
    found: set[torch.fx.Node] = set()
    for node in graph_module.graph.nodes:
        if node.op == "placeholder" or (node.op != "get_attr" and any(a in found for a in node.all_input_nodes)):
            found.add(node)
    return found


def _producer(node: Any) -> Any:
    """Skip a ``dequantize ← quantize`` pair back to the op that produced the value."""
    if _is(node, _DEQUANTIZE):
        node = node.args[0]
        if _is(node, _QUANTIZE):
            node = node.args[0]
    return node


def _source(graph_module, arg: Any, activations: set) -> dict[str, Any]:
    """Where a cat input comes from: through qparam-preserving ops back to the op that set its qparams.

    ``kind`` is ``"activation"`` when computed from a graph input, ``"constant"`` otherwise (a class
    token, folded or not); ``qparams`` are the output qparams of that origin op (the annotated
    activation qparams the path should carry), ``None`` where it is not quantized.
    """
    node = _producer(arg)
    chain = []
    while (isinstance(node, torch.fx.Node) and node.op == "call_function"
           and op_name(node.target) in QPARAM_PRESERVING_OPS):
        chain.append(node.name)
        node = _producer(node.args[0])
    if not isinstance(node, torch.fx.Node):
        return {"kind": "constant", "node": None, "op": None, "via": chain, "qparams": None}
    origin_qparams = _output_qparams(graph_module, node)
    if origin_qparams is None and node.op == "get_attr":  # a folded quantized constant feeds the dequantize
        origin_qparams = _input_qparams(graph_module, arg)
    return {"kind": "activation" if node in activations else "constant", "node": node.name,
            "op": op_name(node.target) if node.op == "call_function" else node.op, "via": chain,
            "qparams": origin_qparams}


def qparam_flow(graph_module: torch.fx.GraphModule) -> list[dict[str, Any]]:
    """Input and output qparams of every qparam-preserving op and every ``cat`` of a converted graph.

    Input qparams come from the ``dequantize_per_tensor`` feeding the op (``None``: the input is
    float), output qparams from the ``quantize_per_tensor`` consuming it (``None``: float output).
    ``cat`` entries also give, per input, its ``source``: the op whose annotated qparams it carries
    once qparam-preserving ops are walked back (``kind`` ``"activation"`` or ``"constant"``).

    Args:
        graph_module (torch.fx.GraphModule): a PT2E-converted module (``convert_pt2e`` output).

    Returns:
        list[dict]: plain JSON-able entries in graph order, e.g.::

            {"op": "aten.transpose.int", "node": "transpose",
             "inputs": [{"scale": 0.0154, "zero_point": 23, "quant_min": -128, "quant_max": 127,
                         "dtype": "int8", "node": "dequantize_per_tensor_default_9"}],
             "output": {"scale": 0.0154, "zero_point": 23, ...}}

            {"op": "aten.cat.default", "node": "cat", "inputs": [{...}, {...}], "output": {...},
             "sources": [{"kind": "constant", "node": "quantize_per_tensor_default_11", "op": "get_attr", ...},
                         {"kind": "activation", "node": "conv2d", "op": "aten.conv2d.default",
                          "via": ["transpose", "flatten"], "qparams": {...}}]}
    """
    activations = _activations(graph_module)
    flow = []
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        if name in CAT_OPS:
            tensors = list(node.args[0]) if node.args else list(node.kwargs.get("tensors", ()))
            flow.append({"op": name, "node": node.name,
                         "inputs": [_input_qparams(graph_module, t) for t in tensors],
                         "output": _output_qparams(graph_module, node),
                         "sources": [_source(graph_module, t, activations) for t in tensors]})
        elif name in QPARAM_PRESERVING_OPS:
            flow.append({"op": name, "node": node.name, "inputs": [_input_qparams(graph_module, node.args[0])],
                         "output": _output_qparams(graph_module, node)})
    return flow


def output_qparams(graph_module: torch.fx.GraphModule) -> list[dict[str, Any] | None]:
    """Qparams of the ``dequantize_per_tensor`` producing each graph output (``None``: a float output).

    The quantized tolerance of an output is a few times its ``scale``.
    """
    out = []
    for node in graph_module.graph.nodes:
        if node.op == "output":
            out.extend(_input_qparams(graph_module, value) for value in torch.utils._pytree.tree_leaves(node.args[0]))
    return out
