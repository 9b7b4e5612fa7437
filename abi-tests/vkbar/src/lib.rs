//! Vulkan device-local, host-visible memory: VRAM mapped through the PCIe BAR.
