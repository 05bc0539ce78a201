"""Helpers the launchers share (ET-VK keeps its own in ``ops/impl/utils/`` and ``Common.cpp``); they register no op."""
