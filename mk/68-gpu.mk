# make test-gpu: on a GPU machine, with no emulator: the library over the real CUDA and
# Vulkan drivers (the Vulkan import where there is no gdrdrv and no DMA-BUF mmap, as on cloud
# GPUs), the backend's scenarios, NCCL's allocation pattern, host-written memory (gdrapi_ext.h:
# 1000 flags checked by the CPU and by PTX kernels, with the cost of a flag write and of a read
# round trip), the C ABI suite's threads and fork programs, byte-exact copies of every size
# class up to 4 MiB at every offset class both ways, the tools (-a cuMemCreateFd) and the
# doctor (abi-tests/gpu/run.sh). Skips with a reason where there is no GPU. Not part of
# `make test`: CI has no GPU.
#
# PREBUILT=1 runs what build/ already holds without building anything (a GPU machine without a
# Rust toolchain: build here with `make gpu-programs`, copy build/ there). cuda.h: CUDA_INCLUDE,
# else the nvidia-cuda-runtime wheel, else /usr/local/cuda/include.

GPU_OUT := $(BUILD_DIR)/gpu
GPU_CUDA_INCLUDE = $(or $(CUDA_INCLUDE),$(wildcard /usr/local/cuda/include))

$(GPU_OUT)/copysweep: abi-tests/gpu/copysweep.c harness/check.h harness/gpu.h \
		include/gdrapi.h | lib sim
	@test -n "$(GPU_CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE"; exit 1; }
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Wall -Wextra -Werror -O1 -g -Iinclude -Iharness -I$(GPU_CUDA_INCLUDE) \
		$< -o $@ -L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda

# Everything test-gpu runs.
gpu-programs: lib tools abi-programs vulkan-programs ext-programs $(GPU_OUT)/copysweep

test-gpu: $(if $(PREBUILT),,gpu-programs)
	abi-tests/gpu/run.sh $(BUILD_DIR)

# The script itself, on the emulator's Vulkan stand-in (CI), so that a lease is not spent on it.
test-gpu-script: gpu-programs
	GPU_SIM=$(SIM_DIR) abi-tests/gpu/run.sh $(BUILD_DIR)

TEST_TARGETS += test-gpu-script
.PHONY: test-gpu test-gpu-script gpu-programs
