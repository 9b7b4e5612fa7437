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

#   Last, the UCX arm of bench/upstream/compare.py (bench-ucx) for one quick round, this
#   library on both arms, which must give every case and size.
# make bench-ucx UPSTREAM_LIB_DIR=<dir>: ucx_perftest in loopback on GPU memory (UCT put
#   latency over gdr_copy, UCP put latency and get) with this library and with the
#   libgdrapi.so.2 in UPSTREAM_LIB_DIR, in BENCH_ROUNDS alternating rounds with the A/A arm,
#   through bench/upstream/compare.py (see bench-upstream for the settings that pass through;
#   GDRSIM_BACKING=vulkan on a GPU machine runs it over real VRAM). Uses the UCX that test-ucx
#   built (UCX_DIR=<dir> with <dir>/inst for another).

UCX_DIR := $(BUILD_DIR)/ucx
UCX_GDR := $(UCX_DIR)/gdr

test-ucx: sim
	$(MAKE) --no-print-directory install prefix=$(UCX_GDR) DESTDIR= >/dev/null
	@rc=0; ucx/build.sh $(UCX_DIR) $(UCX_GDR) $(SIM_DIR) || rc=$$?; \
	if [ $$rc = 77 ]; then exit 0; elif [ $$rc != 0 ]; then exit $$rc; fi; \
	ucx/check.sh $(UCX_DIR) $(UCX_GDR) $(SIM_DIR)
	python3 bench/upstream/compare.py --tools ucx --ucx $(UCX_DIR)/inst --rounds 1 --quick \
		--cpu auto --sim $(SIM_DIR) --ours $(LIB_DIR) --upstream $(LIB_DIR) --json $(UCX_DIR)/bench-smoke.json
	python3 -c 'import json,sys; rows=json.load(open(sys.argv[1]))["rows"]; \
		sys.exit(0 if len(rows)==6 and all(r["ours_median"]>0 for r in rows) else \
		"test-ucx: bench-ucx gave %d rows, expected 3 cases x 2 sizes" % len(rows))' $(UCX_DIR)/bench-smoke.json

bench-ucx: lib $(if $(filter 1,$(BENCH_SIM)),sim)
	@test -n "$(UPSTREAM_LIB_DIR)" || { \
		echo "bench-ucx: set UPSTREAM_LIB_DIR=<folder holding gdrcopy 2.6's libgdrapi.so.2>"; exit 2; }
	@test -x $(UCX_DIR)/inst/bin/ucx_perftest || { \
		echo "bench-ucx: no UCX in $(UCX_DIR)/inst (make test-ucx builds it)"; exit 2; }
	$(BENCH_COMPARE) --control --tools ucx --ucx $(abspath $(UCX_DIR))/inst --ours $(LIB_DIR) \
		--upstream $(abspath $(UPSTREAM_LIB_DIR)) $(BENCH_UPSTREAM_ARGS)

TEST_TARGETS += test-ucx
.PHONY: test-ucx bench-ucx
