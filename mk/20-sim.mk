# The emulator: build/sim/libcuda.so.1 (fake CUDA driver plus /dev/gdrdrv), and its own tests.

sim: $(SIM_DIR)/libcuda.so.1 $(SIM_DIR)/libcudart.so.12 $(SIM_DIR)/libnvidia-ml.so.1 \
	$(SIM_DIR)/vulkan/libvulkan.so.1

.PHONY: $(SIM_DIR)/libcuda.so.1
$(SIM_DIR)/libcuda.so.1:
	$(CARGO) build --release --locked -p gdrsim $(CARGO_FLAGS)
	@mkdir -p $(SIM_DIR)
	install -m 755 $(CARGO_TARGET_DIR)/release/libcuda.so $@
	ln -sfn libcuda.so.1 $(SIM_DIR)/libcuda.so

# The minimal CUDA runtime on the driver API and NVML, for CUDA programs run on the emulator
# (UCX's CUDA transports, tools and tests).
.PHONY: $(SIM_DIR)/libcudart.so.12 $(SIM_DIR)/libnvidia-ml.so.1
$(SIM_DIR)/libcudart.so.12:
	$(CARGO) build --release --locked -p gdrsim-cudart $(CARGO_FLAGS)
	@mkdir -p $(SIM_DIR)
	install -m 755 $(CARGO_TARGET_DIR)/release/libcudart.so $@
	ln -sfn libcudart.so.12 $(SIM_DIR)/libcudart.so
$(SIM_DIR)/libnvidia-ml.so.1:
	$(CARGO) build --release --locked -p gdrsim-nvml $(CARGO_FLAGS)
	@mkdir -p $(SIM_DIR)
	install -m 755 $(CARGO_TARGET_DIR)/release/libnvidia_ml.so $@
	ln -sfn libnvidia-ml.so.1 $(SIM_DIR)/libnvidia-ml.so

# The Vulkan stand-in (the emulator's answers behind a libvulkan.so.1) in a directory of its
# own, so that only programs run with $(SIM_STANDIN_ENV) find it before the real loader.
SIM_STANDIN_ENV = LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 LD_LIBRARY_PATH=$(SIM_DIR)/vulkan:$(SIM_DIR):$(LIB_DIR)
.PHONY: $(SIM_DIR)/vulkan/libvulkan.so.1
$(SIM_DIR)/vulkan/libvulkan.so.1:
	$(CARGO) build --release --locked -p gdrsim-vulkan $(CARGO_FLAGS)
	@mkdir -p $(SIM_DIR)/vulkan
	install -m 755 $(CARGO_TARGET_DIR)/release/libgdrsim_vulkan.so $@
	ln -sfn libvulkan.so.1 $(SIM_DIR)/vulkan/libvulkan.so

SIM_TESTS_DIR := $(BUILD_DIR)/sim-tests
SIM_TESTS_SRC := $(wildcard gdrsim/tests/c/*.c)
# The harness (harness/check.h and its case runner) and gdrdrv's ABI (abi/include).
SIM_TESTS_DEPS := $(SIM_TESTS_SRC) $(wildcard gdrsim/tests/c/*.h) gdrsim/include/gdrsim.h \
	harness/check.h harness/check_cases.h abi/include/gdrdrv_abi.h

$(SIM_TESTS_DIR)/sim_tests: $(SIM_TESTS_DEPS) $(SIM_DIR)/libcuda.so.1
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(SIM_TESTS_DIR)
	$(CC) -O1 -g -Wall -Wextra -Werror -Wno-unused-result -I$(CUDA_INCLUDE) -Igdrsim/include \
		-Iharness -Iabi/include -o $@ $(SIM_TESTS_SRC) -L$(SIM_DIR) -lcuda -lpthread -ldl

# Every case of the driver, CUDA and Vulkan stand-in surface, under each setting that changes
# behaviour.
test-sim: $(SIM_TESTS_DIR)/sim_tests $(SIM_DIR)/vulkan/libvulkan.so.1
	$(SIM_STANDIN_ENV) gdrsim/tests/c/run.sh $(SIM_TESTS_DIR)/sim_tests
TEST_TARGETS += test-sim
.PHONY: test-sim
