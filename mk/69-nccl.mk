# make test-nccl: real NCCL (a pip wheel) on two GPUs, its network transport forced on
# loopback (no P2P, no shared memory: NCCL's socket transport on lo), gdrcopy enabled
# (NCCL_GDRCOPY_ENABLE=1) through this library with no kernel module (GDRAPI_USE_VULKAN=1):
# the all-reduce sums from 8 B to 64 MiB, NCCL's "GDRCOPY enabled" line with this library's
# versions, NCCL's pins and maps counted as they reach the library, then a latency table with
# and without NCCL_GDRCOPY_ENABLE (abi-tests/nccl/run.sh; abi-tests/nccl/README.md). Skips with
# a reason where fewer than two GPUs are visible. Not part of `make test`: CI has no GPU, and
# NCCL is a 200 MB wheel that no CI run should download.
#
# PREBUILT=1 builds nothing with cargo (a GPU machine without a Rust toolchain: `make lib`
# here, carry build/lib there). allreduce.c is compiled by the script against the NCCL and
# CUDA runtime it finds (abi-tests/nccl/locate.py: NCCL_HOME and CUDA_HOME, else the pip wheels
# of python3, else /usr/local/cuda, else a scratch venv where pip reaches an index).
#
# make nccl-program: that build alone, no GPU needed (a compile check of allreduce.c).
# make test-nccl-count (CI): the counting shim test-nccl puts in front of the library, on the
# emulator's Vulkan stand-in, under nccl_pattern (which dlopens libgdrapi.so as NCCL does):
# every call is counted, and the counts agree with the library's own debug lines.

NCCL_OUT := $(BUILD_DIR)/nccl
NCCL_SHIM := $(NCCL_OUT)/count/libgdrapi.so

# harness/gdr_count.c as a libgdrapi.so of its own, needing libgdrapi.so.2 (run.sh builds it the
# same way for test-nccl): first on LD_LIBRARY_PATH, it is what dlopen("libgdrapi.so") finds
# (NCCL's dlsym on that handle cannot be interposed with LD_PRELOAD). --no-as-needed: it calls
# nothing of libgdrapi.so.2 by name.
$(NCCL_SHIM): harness/gdr_count.c | $(if $(PREBUILT),,lib)
	@mkdir -p $(@D)
	$(CC) -O1 -g -Wall -Werror -shared -fPIC -Iinclude -Wl,-soname,libgdrapi.so $< -o $@ \
		-Wl,--no-as-needed -L$(LIB_DIR) -l:libgdrapi.so.2 -ldl

# The script builds allreduce.c and the shim itself, once it has found two GPUs and NCCL.
test-nccl: $(if $(PREBUILT),,lib)
	abi-tests/nccl/run.sh $(BUILD_DIR)

nccl-program: $(if $(PREBUILT),,lib)
	abi-tests/nccl/run.sh $(BUILD_DIR) --build-only

test-nccl-count: lib sim vulkan-programs $(NCCL_SHIM)
	@log=$(NCCL_OUT)/count-check.log; \
	LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 LD_LIBRARY_PATH=$(NCCL_OUT)/count:$(SIM_DIR)/vulkan:$(SIM_DIR):$(LIB_DIR) \
		$(SIM_VULKAN_VARS) GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=1 $(VULKAN_OUT)/nccl_pattern >$$log 2>&1; \
	rc=$$?; counts=$$(abi-tests/nccl/counts.sh $$log 1); crc=$$?; echo "test-nccl-count: $$counts"; \
	want='counts: pin=3 map=3 unmap=3 unpin=3 to=1024 from=1 processes=1; library log: pinned=3 mapped=3 unmapped=3'; \
	if [ $$rc -ne 0 ] || [ $$crc -ne 0 ] || ! grep -qx '[0-9]* passed, 0 failed' $$log || \
		[ "$$counts" != "$$want" ]; then \
		tail -20 $$log; echo "test-nccl-count: FAILED (want: $$want)"; exit 1; fi; \
	echo "test-nccl-count: nccl_pattern through the counting shim: every call counted, as the library logged it"

TEST_TARGETS += test-nccl-count
.PHONY: test-nccl nccl-program test-nccl-count
