# Real GPU memory through the PCIe BAR, from Vulkan (bench).
#
# make bench-bar: needs a GPU machine whose Vulkan driver offers a device-local, host-visible
#   memory type (NVIDIA with a large BAR1 does), the Vulkan loader (libvulkan.so.1) and, for the
#   GPU-side checks, libcuda.so.1. Prints the device, the smaps flags of the mapping, the CUDA
#   round trip, a correctness sweep of each copy method, then GB/s tables per size and direction.
#   BAR_UPSTREAM=<libgdrapi.so.2.6 built from gdrcopy 2.6> adds upstream's copy and kernels;
#   BAR_IMPLS=auto (default) also times every copy-engine family this CPU runs, one process each
#   (GDRAPI_COPY_IMPL); BAR_ARGS passes more options (barbench --help).
# make bench-bar BAR_ARGS=--host-wc: the same checks and tables (ours, memcpy, upstream's copy
#   and kernels with BAR_UPSTREAM, the BAR_IMPLS processes) on CUDA host memory from
#   cuMemHostAlloc(WRITECOMBINED | DEVICEMAP) instead of the BAR, without Vulkan, checked
#   through its device pointer; needs libcuda.so.1 and a GPU. Known limit: on a virtual machine
#   (the project's GPU machine is one) this memory reads at cached speed, so it is no stand-in
#   for a BAR there; the BAR numbers come from the Vulkan memory of plain make bench-bar.
# make test-vkbar: the same program on any Vulkan device (lavapipe on machines without a GPU),
#   small sizes, no CUDA: exercises the checks and the tables, not a measurement.

BAR_UPSTREAM ?=
BAR_IMPLS ?= auto
BAR_ARGS ?=

bench-bar:
	$(CARGO) build --release --locked -p gdrapi-bench --bin barbench $(CARGO_FLAGS)
	$(CARGO_TARGET_DIR)/release/barbench $(if $(BAR_UPSTREAM),--upstream $(BAR_UPSTREAM)) $(if $(BAR_IMPLS),--impls $(BAR_IMPLS)) $(BAR_ARGS)

test-vkbar:
	$(CARGO) build --locked -p gdrapi-bench --bin barbench $(CARGO_FLAGS)
	$(CARGO_TARGET_DIR)/debug/barbench --quick --no-cuda --impls portable --alloc 4M --max 64K --reps 1 --sample-ms 0.1

TEST_TARGETS += test-vkbar
.PHONY: bench-bar test-vkbar
