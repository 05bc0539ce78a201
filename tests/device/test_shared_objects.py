"""Whole-graph mode as ET-VK records a delegate: each ``SharedObject``'s users bound to one allocation (serialized
``mem_obj_id``s and ``TmpTensor``s), and the recorded command buffer resubmitted until a resize. Raw Vulkan work runs
in a process of its own (``testutils.isolated``)."""

from __future__ import annotations

import numpy as np

from tests.testutils import first_adapter, isolated, requires_tree, requires_vulkan

CASE = r"^resnet_q8\["
"""A q8ta conv model: serialized shared objects, and a ``TmpTensor`` (the dummy bias) in each conv."""


def _prepared():
    from vkdiff.cases.catalog import all_model_cases
    from vkdiff.harness.device_models import prepare_model

    (case,) = all_model_cases(CASE)
    return prepare_model(case)


def whole_graph_run(tree) -> dict:
    """In the child: the delegate built in whole-graph mode on raw Vulkan, executed 3 times, then once more after a
    resize of nothing; what was shared, how, and what each execute submitted."""
    from vkdiff.device.transports.adapters import select
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.device.graph.delegate import DelegateGraph
    from vkdiff.device.runtime.routing import route_for
    from vkdiff.device.runtime.resources import read_buffers

    model = _prepared()
    info, adapter = select(via="vulkan")[0]
    ctx = DeviceContext(info, adapter, ShaderBuilder(tree))
    graph = DelegateGraph(ctx, model.delegate, route=route_for("native", info), tree=tree, probe=False, exact=True,
                          alias=True)
    compute = graph.graph
    queue = compute.device.queue
    submitted = {"run": 0, "resubmit": 0}
    run, resubmit = queue.run, queue.resubmit

    def counted_run(*args, **kwargs):
        submitted["run"] += bool(kwargs.get("keep"))
        return run(*args, **kwargs)

    def counted_resubmit(*args, **kwargs):
        submitted["resubmit"] += 1
        return resubmit(*args, **kwargs)

    queue.run, queue.resubmit = counted_run, counted_resubmit
    outputs = [graph.execute(model.steps[0]).outputs[0] for _ in range(3)]
    shared = {m: users for m, users in compute.shared.items() if len(users) > 1}
    one_allocation = all(len({id(u.handle.shared) for u in users}) == 1 and users[0].handle.shared is not None
                         for users in shared.values())
    buffers = next(([u for u in users if u.storage == "buffer"] for users in shared.values()
                    if sum(u.storage == "buffer" for u in users) > 1), [])
    through_other = None
    if len(buffers) > 1:
        pattern = np.arange(16, dtype=np.uint8) + 101
        queue.write_buffer(buffers[0].handle, 0, pattern)
        through_other = bytes(read_buffers(compute.device, [buffers[1]])[0][:16]) == pattern.tobytes()
    compute.mark_updated(compute.execute_nodes[0].args[0])
    compute.propagate_resize()
    after_resize = graph.execute(model.steps[0]).outputs[0]
    serialized = max(info.mem_obj_id for info in model.delegate.tensors.values()) + 1
    temporaries = [t.memory for users in compute.shared.values() for t in users if t.memory >= serialized]
    return {"shared": len(shared), "users": sum(len(u) for u in shared.values()), "one_allocation": one_allocation,
            "through_other": through_other, "submitted": submitted, "temporaries": temporaries,
            "identical": all(np.array_equal(o, outputs[0]) for o in [*outputs, after_resize])}


@requires_tree
@requires_vulkan
def test_whole_graph_mode_binds_each_shared_object_once_and_resubmits_until_a_resize(et_tree):
    found = isolated(whole_graph_run, et_tree)
    assert found["shared"] >= 3 and found["one_allocation"], found
    assert found["through_other"] is True, "a write through one user must be read through another"
    assert found["submitted"] == {"run": 2, "resubmit": 2}, "recorded once, resubmitted twice, re-encoded once resized"
    assert found["identical"], found
    assert len(set(found["temporaries"])) < len(found["temporaries"]), \
        "each conv's dummy-bias TmpTensor takes the shared object the previous one gave back"


@requires_tree
@requires_vulkan
def test_tmp_tensors_reuse_the_shared_objects_released_at_the_end_of_their_scope(et_tree):
    """``get_sobj_idx``: past every serialized shared object; within a scope each its own; after, the released ones
    again, last-released first (a stack). Outside whole-graph mode they keep their own storage."""
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.device.graph.compute import ComputeGraph

    info, adapter = first_adapter()
    graph = ComputeGraph(DeviceContext(info, adapter, ShaderBuilder(et_tree)))
    graph.add_tensor((4,), "float32", "buffer", memory=2)
    with graph.tmp_scope():
        a = graph.add_tensor((4,), "float32", "buffer", temporary=True)
        b = graph.add_tensor((8,), "int32", "buffer", temporary=True)
    with graph.tmp_scope():
        c = graph.add_tensor((2,), "float32", "buffer", temporary=True)
        d = graph.add_tensor((2,), "float32", "buffer", temporary=True)
        e = graph.add_tensor((2,), "float32", "buffer", temporary=True)
    assert (a.memory, b.memory) == (3, 4)
    assert (c.memory, d.memory, e.memory) == (3, 4, 5)
    assert a.handle is not c.handle and not graph.alias
