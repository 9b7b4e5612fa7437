# make test-vulkan: the Vulkan-import backend on the emulator (abi-tests/vulkan), in a cloud
# GPU's situation (no gdrdrv node, CUDA 13.0) with the emulator's Vulkan stand-in
# (build/sim/vulkan/libvulkan.so.1) first on the library path: selection and fallback, every
# refusal with its log line, the API on exportable VMM memory, the allocation's lifetime,
# injected CUDA and Vulkan failures, NCCL's allocation pattern. The same programs run over the
# real drivers in `make test-gpu`.

VULKAN_SRC := abi-tests/vulkan
VULKAN_OUT := $(BUILD_DIR)/vulkan
VULKAN_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -O1 -g -Iinclude -Iharness -Igdrsim/include

$(VULKAN_OUT)/vulkan_test: $(VULKAN_SRC)/vulkan_test.c harness/check.h harness/gdr_calls.h harness/gpu.h \
		include/gdrapi.h gdrsim/include/gdrsim.h | lib sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(VULKAN_CFLAGS) -I$(CUDA_INCLUDE) $< -o $@ -L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda -lpthread -ldl

# NCCL's way: libgdrapi is dlopened by name, never linked.
$(VULKAN_OUT)/nccl_pattern: $(VULKAN_SRC)/nccl_pattern.c harness/check.h | sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(VULKAN_CFLAGS) -I$(CUDA_INCLUDE) $< -o $@ -L$(SIM_DIR) -lcuda -lpthread -ldl

# Many pins inside one allocation, and many allocations (the scale of memory pools).
$(VULKAN_OUT)/pools: $(VULKAN_SRC)/pools.c harness/check.h harness/gpu.h \
		include/gdrapi.h gdrsim/include/gdrsim.h | lib sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(VULKAN_CFLAGS) -I$(CUDA_INCLUDE) $< -o $@ -L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda -ldl

vulkan-programs: $(VULKAN_OUT)/vulkan_test $(VULKAN_OUT)/nccl_pattern $(VULKAN_OUT)/pools

test-vulkan: lib sim vulkan-programs
	$(VULKAN_SRC)/run.sh $(VULKAN_OUT) $(LIB_DIR) $(SIM_DIR)

TEST_TARGETS += test-vulkan
.PHONY: test-vulkan vulkan-programs
