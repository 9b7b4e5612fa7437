# UCX, the consumer the project exists for, built from Debian's source package against our
# library and run on the emulator (rig in ucx/).
#
# make test-ucx: builds UCX 1.13 (apt-get source ucx, with a deb-src entry private to
#   build/ucx; CUDA 12 headers from the nvidia-*-cu12 wheels; the emulator's libcuda.so.1,
#   libcudart.so.12 and libnvidia-ml.so.1; --with-gdrcopy=our make install in build/ucx/gdr)
#   once, reusing it while ucx/build.sh is unchanged; then, with UCX's default settings,
#   ucx_info -d, ucx_perftest loopback on GPU memory (UCT put over gdr_copy, UCP put and get),
#   ucx/uct_gdr_check.c, and UCX's gtest filtered to gdr_copy, per GDRSIM_PERSISTENT mode.
#   Skips (exit 0 with a reason) when a tool is missing, fails instead with CI set.

UCX_DIR := $(BUILD_DIR)/ucx
UCX_GDR := $(UCX_DIR)/gdr

test-ucx: sim
	$(MAKE) --no-print-directory install prefix=$(UCX_GDR) DESTDIR= >/dev/null
	@rc=0; ucx/build.sh $(UCX_DIR) $(UCX_GDR) $(SIM_DIR) || rc=$$?; \
	if [ $$rc = 77 ]; then exit 0; elif [ $$rc != 0 ]; then exit $$rc; fi; \
	ucx/check.sh $(UCX_DIR) $(UCX_GDR) $(SIM_DIR)

TEST_TARGETS += test-ucx
.PHONY: test-ucx
