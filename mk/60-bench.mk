# make bench: the copy-engine table. Every write-combining kernel family this CPU runs, and the
#   process-wide dispatch, against glibc memcpy, on ordinary memory, both directions, sizes
#   1 B to 16 MiB: GB/s with ratios, then ns per call (best / median of interleaved rounds).
#   BENCH_ARGS passes options (--quick, --sizes, --impls, --dev-offset...; see --help).
#   GDRAPI_COPY_IMPL=<family> in the environment changes what "dispatch" uses.
#   Then, where libcuda.so.1 and a GPU are present, the same tables on CUDA write-combined host
#   memory (cuMemHostAlloc with CU_MEMHOSTALLOC_WRITECOMBINED), which the CPU maps much as it
#   maps a BAR; elsewhere (CI) one line says it was skipped and why (the dlopen error, or the
#   call and its CUresult). BENCH_ARGS=--no-host-wc leaves it out. Known limit: on a virtual
#   machine this memory may read at cached speed, so it is no stand-in for a BAR there; BAR
#   numbers come from Vulkan memory (make bench-bar). Upstream's kernels on this memory:
#   make bench-bar BAR_ARGS=--host-wc BAR_UPSTREAM=...
# make bench UPSTREAM_LIB=<another libgdrapi.so, e.g. upstream 2.6 built outside the tree>:
#   additionally loads both libraries with dlopen on the emulator, maps the same device memory
#   through each one's API and times their gdr_copy_to_mapping/gdr_copy_from_mapping side by
#   side, printing ours/theirs per size and direction (target bench-against).
# make test-copy: the full release-mode correctness sweep of the copy engine (every size
#   0..4160 x every device and host offset 0..63, every family, both directions, guard pages),
#   then a --quick run of the benchmark as a smoke test.

BENCH_ARGS ?=
UPSTREAM_LIB ?=
BENCH_BIN := $(CARGO_TARGET_DIR)/release/gdrapi-bench

.PHONY: bench bench-engines bench-against bench-build test-copy

bench: bench-engines $(if $(UPSTREAM_LIB),bench-against)

bench-build:
	$(CARGO) build --release --locked -p gdrapi-bench $(CARGO_FLAGS)

bench-engines: bench-build
	$(BENCH_BIN) $(BENCH_ARGS)

bench-against: bench-build lib sim
	@test -n "$(UPSTREAM_LIB)" || { echo "bench-against: set UPSTREAM_LIB=<path to the other libgdrapi.so>"; exit 2; }
	$(SIM_ENV) $(BENCH_BIN) --against $(abspath $(UPSTREAM_LIB)) --ours $(LIB_DIR)/$(LIB_REAL) $(BENCH_ARGS)

# Release without LTO: the sweep needs optimised code, not a whole-program link.
COPY_TEST_ENV := CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16

test-copy:
	$(COPY_TEST_ENV) $(CARGO) test --release --locked -p gdrapi --lib $(CARGO_FLAGS) copy:: -- --ignored
	$(COPY_TEST_ENV) $(CARGO) run --release --locked -p gdrapi-bench --bin gdrapi-bench $(CARGO_FLAGS) -- --quick
TEST_TARGETS += test-copy
