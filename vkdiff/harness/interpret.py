"""Evaluate a decoded Vulkan delegate with the numpy reference ops, on its own constants.

This answers "does the fused program compute the same function as the model?"
without any GPU: every ``et_vk`` op runs through ``vkdiff.reference``; the handful of
aten ops that fill the gaps between fused ops are numpy one-liners. Values are kept
in float64; constants are read in the dtype the delegate stores them (so float16
scales of a ``force_fp16`` lowering are what the reference sees).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from vkdiff import reference
from vkdiff.harness.delegate import Delegate, VkOp


class UnsupportedOpError(NotImplementedError):
    """The interpreter has no reference for an op of the delegate (→ ``NOT_RUN`` for numerics)."""


Env = dict[int, np.ndarray]
OpFn = Callable[[Delegate, VkOp, Env], None]
OPS: dict[str, OpFn] = {}


def op(*names: str) -> Callable[[OpFn], OpFn]:
    def wrap(fn: OpFn) -> OpFn:
        for name in names:
            OPS[name] = fn
        return fn
    return wrap


def _arg(delegate: Delegate, env: Env, vid: int):
    if vid in env:
        return env[vid]
    if vid in delegate.constants:
        return delegate.constants[vid]
    return delegate.value(vid)


@op("et_vk.linear_q4gsw.default")
def _linear_q4gsw(d: Delegate, o: VkOp, env: Env) -> None:
    x, w, s, g, b = (_arg(d, env, a) for a in o.args[:5])
    env[o.args[5]] = reference.linear_q4gsw(x, w, s, g, b)


@op("et_vk.linear_dq8ca_q4gsw.default")
def _linear_dq8ca(d: Delegate, o: VkOp, env: Env) -> None:
    x, s_x, zp, w, ws, s, g, b = (_arg(d, env, a) for a in o.args[:8])
    env[o.args[8]] = reference.linear_dq8ca_q4gsw(x, s_x, zp, w, ws, s, g, b)


@op("et_vk.embedding_q4gsw.default")
def _embedding(d: Delegate, o: VkOp, env: Env) -> None:
    w, s, g, idx = (_arg(d, env, a) for a in o.args[:4])
    linear = bool(_arg(d, env, o.args[4])) if len(o.args) > 5 else False
    env[o.args[-1]] = reference.embedding_q4gsw(np.asarray(idx).astype(np.int64), w, s, g, linear)


@op("torchao.choose_qparams_affine.default")
def _choose_qparams(d: Delegate, o: VkOp, env: Env) -> None:
    x = _arg(d, env, o.args[0])
    scale_id, zp_id = d.value(o.args[-1])
    zp_dtype = np.dtype(d.tensors[zp_id].dtype)
    scale, zp = reference.choose_qparams_per_token_asymmetric(np.asarray(x, dtype=np.float32),
                                                              zero_point_dtype=zp_dtype)
    env[scale_id] = scale.reshape(d.tensors[scale_id].dims)
    env[zp_id] = zp.reshape(d.tensors[zp_id].dims)


def _binary(fn):
    def run(d: Delegate, o: VkOp, env: Env) -> None:
        a, b = (np.asarray(_arg(d, env, v), dtype=np.float64) for v in o.args[:2])
        env[o.args[-1]] = fn(a, b)
    return run


OPS["aten.add.Tensor"] = _binary(np.add)
OPS["aten.sub.Tensor"] = _binary(np.subtract)
OPS["aten.mul.Tensor"] = _binary(np.multiply)
OPS["aten.div.Tensor"] = _binary(np.divide)


@op("aten.sigmoid.default")
def _sigmoid(d: Delegate, o: VkOp, env: Env) -> None:
    env[o.args[-1]] = 1.0 / (1.0 + np.exp(-np.asarray(_arg(d, env, o.args[0]), dtype=np.float64)))


@op("aten.silu.default")
def _silu(d: Delegate, o: VkOp, env: Env) -> None:
    x = np.asarray(_arg(d, env, o.args[0]), dtype=np.float64)
    env[o.args[-1]] = x / (1.0 + np.exp(-x))


@op("aten.view_copy.default", "aten._unsafe_view.default", "aten.squeeze_copy.dims", "aten.unsqueeze_copy.default",
    "aten.clone.default", "aten._to_copy.default")
def _reshape(d: Delegate, o: VkOp, env: Env) -> None:
    out = o.args[-1]
    env[out] = np.asarray(_arg(d, env, o.args[0])).reshape(d.tensors[out].dims)


@op("aten.permute_copy.default")
def _permute(d: Delegate, o: VkOp, env: Env) -> None:
    env[o.args[-1]] = np.transpose(np.asarray(_arg(d, env, o.args[0])), d.value(o.args[1]))


def run(delegate: Delegate, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Outputs of the delegate for ``inputs`` (in ``input_ids`` order), float64.

    Raises:
        UnsupportedOpError: an op has no reference (names the op).
    """
    missing = sorted({o.name for o in delegate.ops if o.name not in OPS})
    if missing:
        raise UnsupportedOpError(f"no reference for {', '.join(missing)}")
    env: Env = {vid: np.asarray(x) for vid, x in zip(delegate.input_ids, inputs)}
    for operation in delegate.ops:
        OPS[operation.name](delegate, operation, env)
    return [np.asarray(env[vid], dtype=np.float64) for vid in delegate.output_ids]
