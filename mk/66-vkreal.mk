# The emulator on real VRAM (GDRSIM_BACKING=vulkan; gdrsim/README.md, "Real GPU
# memory"): device memory is one Vulkan allocation of BAR memory, shared with the real CUDA
# driver, and the emulated /dev/gdrdrv maps pins of it through Vulkan.
#
# make test-vkreal: no GPU needed. The backing's checks (gdrsim/tests/vkreal.c) on
#   whatever Vulkan device the machine has (lavapipe without a GPU), with
#   GDRSIM_REAL_LIBCUDA=none: device pointers are CPU addresses of the arena.
# make validate-bar: needs a GPU machine whose Vulkan driver offers a device-local,
#   host-visible memory type (NVIDIA with a large BAR1), the Vulkan loader and the real
#   libcuda.so.1 (found by path, or GDRSIM_REAL_LIBCUDA=<path>; VK_DRIVER_FILES may have to
#   name nvidia_icd.json). Runs the same checks with real CUDA, then the C ABI api suite on
#   real VRAM. UPSTREAM_TESTS=<directory of gdrcopy 2.6's test programs> adds gdrcopy_sanity,
#   gdrcopy_copybw, gdrcopy_copylat and gdrcopy_apiperf against this project's library, and
#   UPSTREAM_LIB_DIR=<directory whose libgdrapi.so.2 is gdrcopy 2.6's> against that one too.
#   Not part of `make test`.

VKREAL_OUT := $(BUILD_DIR)/vkreal
VKREAL_ENV := GDRSIM_BACKING=vulkan GDRSIM_VRAM_SIZE=$(or $(VKREAL_VRAM),256M)
UPSTREAM_TESTS ?=
UPSTREAM_LIB_DIR ?=

$(VKREAL_OUT)/vkreal: gdrsim/tests/vkreal.c harness/check.h abi/include/gdrdrv_abi.h \
		gdrsim/include/gdrsim.h | sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) -std=c11 -O1 -g -Wall -Wextra -Werror -I$(CUDA_INCLUDE) -Igdrsim/include -Iharness -Iabi/include \
		$< -o $@ -L$(SIM_DIR) -lcuda

test-vkreal: $(VKREAL_OUT)/vkreal
	$(SIM_ENV) $(VKREAL_ENV) GDRSIM_REAL_LIBCUDA=none $(VKREAL_OUT)/vkreal

validate-bar: $(VKREAL_OUT)/vkreal lib abi-programs
	@echo "== vkreal checks"
	$(SIM_ENV) $(VKREAL_ENV) $(VKREAL_OUT)/vkreal
	@echo "== C ABI api suite on real VRAM"
	$(VKREAL_ENV) GDRAPI_TEST_OURS=1 ABI_SUITES=api abi-tests/c/run-all.sh $(ABI_OUT) $(LIB_DIR) $(SIM_DIR) || true
	@for libdir in $(if $(UPSTREAM_TESTS),$(abspath $(LIB_DIR)) $(UPSTREAM_LIB_DIR)); do \
		for t in "gdrcopy_sanity" "gdrcopy_copybw" "gdrcopy_copylat -s 1048576" "gdrcopy_apiperf -s 1048576"; do \
			echo "== $$t with $$libdir/libgdrapi.so.2"; \
			LD_PRELOAD=$(abspath $(SIM_DIR))/libcuda.so.1 LD_LIBRARY_PATH=$(abspath $(SIM_DIR)):$$libdir \
				$(VKREAL_ENV) $(UPSTREAM_TESTS)/$$t || echo "== $$t: exit status $$?"; \
		done; \
	done

TEST_TARGETS += test-vkreal
.PHONY: test-vkreal validate-bar
