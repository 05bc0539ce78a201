"""Operator schemas: parsed from the texts torch prints, checked against the installed packages, bound by name."""

from __future__ import annotations

import pytest

from vkdiff.datamodel import OP_SCHEMAS, Delegate, OpSchema, SchemaError, UnknownOpError, VkOp, VkTensorInfo, schema_of
from vkdiff.datamodel.schemas import ET_VK_RUNTIME_TEXTS, PYTHON_OPERATOR_TEXTS


def registered_schema(name: str) -> str:
    """``str(torch.ops.<ns>.<op>.<overload>._schema)`` with every op library of the stack loaded."""
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk)
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama)
    import torch
    import torchao  # noqa: F401  (torchao)

    namespace, op, overload = name.split(".")
    return str(getattr(getattr(getattr(torch.ops, namespace), op), overload)._schema)


TORCH_SCHEMAS = sorted(n for n, s in OP_SCHEMAS.items()
                       if s.text not in PYTHON_OPERATOR_TEXTS + ET_VK_RUNTIME_TEXTS)


@pytest.mark.parametrize("name", TORCH_SCHEMAS)
def test_schema_text_is_what_the_installed_packages_register(name):
    assert OP_SCHEMAS[name].text == registered_schema(name)


def test_parse_handles_defaults_lists_kwarg_only_and_tuple_returns():
    s = schema_of("torchao.choose_qparams_affine.default")
    assert s.names[:4] == ("input", "mapping_type", "block_size", "target_dtype")
    assert s.argument("keepdim").default == "False" and s.argument("input").type == "Tensor?"
    assert s.returns == ("Tensor", "Tensor")
    to_copy = schema_of("aten._to_copy.default")
    assert [a.kwarg_only for a in to_copy.arguments] == [False] + [True] * 6
    mutating = schema_of("llama.sdpa_with_kv_cache.default")
    assert mutating.argument("key_cache").type == "Tensor(a!)"


def test_aliases_are_the_names_et_vk_writes():
    assert schema_of("sdpa_with_kv_cache.default").name == "llama.sdpa_with_kv_cache.default"
    assert schema_of("sym_size.int").name == "aten.sym_size.int"
    assert schema_of("add").name == "_operator.add.default"


def test_unknown_op_names_the_file_to_extend():
    with pytest.raises(UnknownOpError, match="no schema for operator et_vk.nope.default: add its text to SCHEMA_TEXTS"):
        schema_of("et_vk.nope.default")


def test_bind_checks_the_argument_count():
    s = schema_of("et_vk.linear_q4gsw.default")
    assert s.bind([1, 2, 3, 4, 5]) == {"self": 1, "weights": 2, "weight_scales": 3, "group_size": 4, "bias": 5}
    with pytest.raises(SchemaError, match=r"et_vk.linear_q4gsw.default takes 5 arguments .* the call carries 4"):
        s.bind([1, 2, 3, 4])


def test_malformed_text_is_refused():
    with pytest.raises(SchemaError, match="not an operator schema"):
        OpSchema.parse("linear(Tensor x)")


def test_delegate_bind_expands_tuple_outputs():
    values = [{"kind": "VkTensor"}, {"kind": "String", "string_val": "ASYMMETRIC"}, {"kind": "IntList", "items": [1, 8]},
              {"kind": "Null"}, {"kind": "Int", "int_val": -128}, {"kind": "Int", "int_val": 127}, {"kind": "Null"},
              {"kind": "Null"}, {"kind": "Null"}, {"kind": "Bool", "bool_val": False}, {"kind": "VkTensor"},
              {"kind": "VkTensor"}, {"kind": "ValueList", "items": [10, 11]}]
    tensors = {i: VkTensorInfo(id=i, dtype=d, dims=[1, 1], constant_id=-1, storage="", layout="")
               for i, d in ((0, "float32"), (10, "float32"), (11, "int8"))}
    op = VkOp(index=0, name="torchao.choose_qparams_affine.default", args=list(range(10)) + [12])
    delegate = Delegate(ops=[op], values=values, tensors=tensors, constants={}, constant_keys={}, input_ids=[0],
                        output_ids=[10], blob_size=0)
    call = delegate.bind(op)
    assert call.outputs == (10, 11) and call.out == 12
    assert delegate.value(call.args["mapping_type"]) == "ASYMMETRIC" and delegate.value(call.args["eps"]) is None
