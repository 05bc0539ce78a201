"""How vkdiff reaches a device: the transport interface, wgpu and raw Vulkan behind it, the adapter listing, the
limits a device is created with, the watchdog of a device's child process, and the recording device of repros."""
