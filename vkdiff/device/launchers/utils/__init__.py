"""Helpers the launchers share (ET-VK keeps its own in ``ops/impl/utils/`` and ``Common.cpp``); they register no op.

The ports of ``ops/impl/`` files that register no op of their own live here too, named after their file
(``Conv2dDW.cpp`` → ``conv2d_dw.py``, ``Conv2dPW.cpp`` → ``conv2d_pw.py``, ``Q8taClone.cpp`` → ``q8ta_clone.py``):
every module directly in ``launchers/`` (but ``registry``) registers a launcher.
"""
