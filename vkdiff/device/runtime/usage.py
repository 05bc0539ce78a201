"""WebGPU's usage and map-mode flags, as both transports read them (the raw transport never imports wgpu).

The values are the WebGPU spec's (``GPUBufferUsage``, ``GPUTextureUsage``, ``GPUMapMode``); a test compares them with
the installed wgpu's.
"""

from __future__ import annotations

import enum


class BufferUsage(enum.IntFlag):
    MAP_READ = 1
    MAP_WRITE = 2
    COPY_SRC = 4
    COPY_DST = 8
    UNIFORM = 64
    STORAGE = 128


class TextureUsage(enum.IntFlag):
    COPY_SRC = 1
    COPY_DST = 2
    TEXTURE_BINDING = 4
    STORAGE_BINDING = 8


class MapMode(enum.IntFlag):
    READ = 1
    WRITE = 2
