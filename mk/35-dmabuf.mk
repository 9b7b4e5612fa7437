# make test-dmabuf: the DMA-BUF backend on the emulator (abi-tests/dmabuf): selection and
# fallback, every refusal with its log line, data round trips, unaligned pins, context
# preservation, leaks. Also builds dmabuf-probe, the real-GPU probe (no CUDA link dependency).

DMABUF_SRC := abi-tests/dmabuf
DMABUF_OUT := $(BUILD_DIR)/dmabuf
DMABUF_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -O1 -g -Iinclude -Iharness \
	-Igdrsim/include

$(DMABUF_OUT)/dmabuf_test: $(DMABUF_SRC)/dmabuf_test.c harness/check.h harness/gdr_calls.h harness/gpu.h \
		include/gdrapi.h | lib sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(DMABUF_CFLAGS) -I$(CUDA_INCLUDE) $< -o $@ -L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda -lpthread

# Only libc (and libdl on old glibc): libcuda and libgdrapi are dlopened.
$(DMABUF_OUT)/dmabuf-probe: $(DMABUF_SRC)/probe.c
	@mkdir -p $(@D)
	$(CC) $(DMABUF_CFLAGS) $< -o $@ -ldl

dmabuf-probe: $(DMABUF_OUT)/dmabuf-probe

test-dmabuf: lib sim $(DMABUF_OUT)/dmabuf_test $(DMABUF_OUT)/dmabuf-probe
	@! readelf -d $(LIB_DIR)/$(LIB_REAL) | grep -q 'NEEDED.*libcuda' || \
		{ echo "FAIL: $(LIB_REAL) has a link dependency on libcuda"; exit 1; }
	$(DMABUF_SRC)/run.sh $(DMABUF_OUT) $(LIB_DIR) $(SIM_DIR)

TEST_TARGETS += test-dmabuf
.PHONY: test-dmabuf dmabuf-probe
