"""The part of ET-VK's runtime vkdiff re-hosts (with ``vkdiff.device.graph``): the device context launchers run on,
tensor resources and layouts, ET-VK's barriers and the hazard check, routing and workgroup sizes; and the device's
traits, probed where the Vulkan spec leaves it a choice."""
