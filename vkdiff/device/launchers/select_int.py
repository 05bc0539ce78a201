"""Launcher for ``aten.select.int``: ``Select.cpp`` registers it to the same ``select_int`` as ``select_copy``.

``REGISTER_OPERATORS { VK_REGISTER_OP(aten.select.int, select_int); VK_REGISTER_OP(aten.select_copy.int,
select_int); }``: the view op has no view path; it adds the same ``select[_ubo]_*`` transfer node (ported in
``launchers/select.py``, whose docstring lists the variant, bindings, spec constants and resize).
"""

from __future__ import annotations

from vkdiff.device.launchers.registry import register_op
from vkdiff.device.launchers.select import PORTS, select_copy, select_output

OP = "aten.select.int"

register_op(OP, output=select_output, constants=(), ports=PORTS)(select_copy)
