"""The device layer, grouped by role: ``transports`` (how a device is reached), ``shaders`` (ET-VK's shaders built,
cached and loaded), ``runtime`` and ``graph`` (what vkdiff re-hosts of ET-VK's runtime), ``launchers`` (ET-VK's op
implementations, mirroring ``runtime/graph/ops/impl``); ``boundary`` holds the exceptions every part raises."""
