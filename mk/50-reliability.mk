# Reliability (RELIABILITY.md): the fuzz target (fuzz/), fault injection at every driver call,
# thread and fork stress, and memory-error and race checks of C programs (abi-tests/reliability).
#
# make test-fuzz         short fuzz smoke runs: fixed seed and corpus, FUZZ_SMOKE_RUNS inputs, then
#                        FUZZ_VULKAN_SMOKE_RUNS in the Vulkan import's situation; the findings replayed
# make fuzz              long run: FUZZ_TIME seconds (default 600), corpus kept in $(BUILD_DIR)/fuzz/corpus
#                        (FUZZ_VULKAN=1: in the Vulkan import's situation, corpus in .../corpus-vulkan)
# make test-faults       every driver call the library makes failed with every errno the driver returns
# make test-stress       threads (one gdr_t, separate ones, one range), forks during activity and
#                        during a held call (forkhold); bounded by timeouts
# make test-memcheck     valgrind memcheck on the reliability programs and the C ABI suite's programs
# make test-races        ThreadSanitizer build of the stress program (helgrind: see RELIABILITY.md)
#
# The fuzz target uses libFuzzer from clang (Debian: clang, libclang-rt-*-dev): the library is
# rebuilt with SanitizerCoverage through stable rustc flags (-Cpasses=sancov-module), so libFuzzer
# sees coverage of the Rust code; no nightly toolchain is involved.

REL_SRC := abi-tests/reliability
REL_OUT := $(BUILD_DIR)/reliability
REL_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -O1 -g -Iinclude -Iharness -Igdrsim/include
REL_LIBS := -L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda -lpthread -ldl
REL_TIMEOUT ?= 300

FUZZ_OUT := $(BUILD_DIR)/fuzz
FUZZ_CC ?= clang
FUZZ_TIME ?= 600
FUZZ_SMOKE_RUNS ?= 30000
FUZZ_HOST := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
FUZZ_RUSTFLAGS := -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
	-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
	-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions=on -Coverflow-checks=on \
	-Clink-arg=-L$(FUZZ_OUT)/lib -Clink-arg=-Wl,--no-as-needed -Clink-arg=-lsancov_stub
# FUZZ_NO_MUNMAP=1 leaves injected munmap failures out of the fuzz runs (they were left out
# while finding F1 of RELIABILITY.md was open); fuzz/findings/* are replayed by test-fuzz.
FUZZ_NO_MUNMAP ?= 0
FUZZ_ENV = LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 LD_LIBRARY_PATH=$(FUZZ_OUT)/lib:$(SIM_DIR) \
	$(if $(filter 1,$(FUZZ_NO_MUNMAP)),GDRAPI_FUZZ_NO_MUNMAP_FAULTS=1)
# The Vulkan import's situation: the emulator's Vulkan stand-in first on the path, the
# instrumented library, SIM_VULKAN_VARS (GDRAPI_TEST_ALLOC=vmm makes the target allocate with
# cuMemCreate and model that backend).
FUZZ_VULKAN_ENV = LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 \
	LD_LIBRARY_PATH=$(SIM_DIR)/vulkan:$(SIM_DIR):$(FUZZ_OUT)/lib $(SIM_VULKAN_VARS)
FUZZ_VULKAN_SMOKE_RUNS ?= 30000
FUZZ_VULKAN ?= 0
FUZZ_OPTS := -timeout=10 -rss_limit_mb=2048 -max_len=1024 -print_final_stats=1
FUZZ_FLAGS := $(FUZZ_OPTS) -artifact_prefix=$(FUZZ_OUT)/crash-
FUZZ_VULKAN_FLAGS := $(FUZZ_OPTS) -artifact_prefix=$(FUZZ_OUT)/crash-vulkan-

$(FUZZ_OUT)/lib/libsancov_stub.so: fuzz/sancov_stub.c
	@mkdir -p $(@D)
	$(CC) -O1 -fPIC -shared -Wl,-soname,libsancov_stub.so $< -o $@

# The library with coverage instrumentation, in its own cargo target directory.
.PHONY: $(FUZZ_OUT)/lib/libgdrapi.so.2
$(FUZZ_OUT)/lib/libgdrapi.so.2: $(FUZZ_OUT)/lib/libsancov_stub.so
	@test -n "$(FUZZ_HOST)" || { echo "rustc -vV gave no host triple"; exit 1; }
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/fuzz RUSTFLAGS="$(FUZZ_RUSTFLAGS)" \
		$(CARGO) build --release --locked -p gdrapi --target $(FUZZ_HOST) $(CARGO_FLAGS)
	install -m 755 $(CARGO_TARGET_DIR)/fuzz/$(FUZZ_HOST)/release/libgdrapi.so $@
	ln -sfn libgdrapi.so.2 $(@D)/libgdrapi.so

$(FUZZ_OUT)/gdrapi_calls: fuzz/gdrapi_calls.c $(FUZZ_OUT)/lib/libgdrapi.so.2 include/gdrapi.h \
		gdrsim/include/gdrsim.h | sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	$(FUZZ_CC) -g -O1 -fsanitize=fuzzer -Wall -Wextra -Werror -Iinclude -I$(CUDA_INCLUDE) \
		-Igdrsim/include $< -o $@ -rdynamic -L$(FUZZ_OUT)/lib -Wl,-rpath-link,$(FUZZ_OUT)/lib \
		-lgdrapi -L$(SIM_DIR) -lcuda -ldl

fuzz-build: $(FUZZ_OUT)/gdrapi_calls

# Smoke: a fixed seed over the committed corpus (a scratch copy: libFuzzer adds to it), on
# gdrdrv, then in the Vulkan import's situation.
test-fuzz: fuzz-build
	rm -rf $(FUZZ_OUT)/smoke && mkdir -p $(FUZZ_OUT)/smoke && cp fuzz/corpus/* $(FUZZ_OUT)/smoke/
	$(FUZZ_ENV) timeout 300 $(FUZZ_OUT)/gdrapi_calls -seed=1 -runs=$(FUZZ_SMOKE_RUNS) $(FUZZ_FLAGS) \
		$(FUZZ_OUT)/smoke
	rm -rf $(FUZZ_OUT)/smoke-vulkan && mkdir -p $(FUZZ_OUT)/smoke-vulkan && \
		cp fuzz/corpus/* $(FUZZ_OUT)/smoke-vulkan/
	$(FUZZ_VULKAN_ENV) timeout 300 $(FUZZ_OUT)/gdrapi_calls -seed=1 -runs=$(FUZZ_VULKAN_SMOKE_RUNS) \
		$(FUZZ_VULKAN_FLAGS) $(FUZZ_OUT)/smoke-vulkan
	$(MAKE) --no-print-directory FUZZ_NO_MUNMAP=0 fuzz-replay

# Long run: FUZZ_TIME seconds; the corpus grows in $(FUZZ_OUT)/corpus (corpus-vulkan) across runs.
FUZZ_CORPUS = $(FUZZ_OUT)/corpus$(if $(filter 1,$(FUZZ_VULKAN)),-vulkan)
fuzz: fuzz-build
	mkdir -p $(FUZZ_CORPUS) && cp -n fuzz/corpus/* $(FUZZ_CORPUS)/
	$(if $(filter 1,$(FUZZ_VULKAN)),$(FUZZ_VULKAN_ENV),$(FUZZ_ENV)) $(FUZZ_OUT)/gdrapi_calls \
		-max_total_time=$(FUZZ_TIME) $(if $(filter 1,$(FUZZ_VULKAN)),$(FUZZ_VULKAN_FLAGS),$(FUZZ_FLAGS)) \
		$(FUZZ_CORPUS)

# The inputs that found library bugs, each replayed once with every fault allowed, in both
# situations.
fuzz-findings: fuzz-build
	$(MAKE) --no-print-directory FUZZ_NO_MUNMAP=0 fuzz-replay
fuzz-replay:
	$(FUZZ_ENV) $(FUZZ_OUT)/gdrapi_calls $(wildcard fuzz/findings/*)
	$(FUZZ_VULKAN_ENV) $(FUZZ_OUT)/gdrapi_calls $(wildcard fuzz/findings/*)

TEST_TARGETS += test-fuzz
.PHONY: fuzz fuzz-build test-fuzz fuzz-findings fuzz-replay

# ---- fault injection ----

$(REL_OUT)/%: $(REL_SRC)/%.c harness/check.h harness/check_cases.h harness/check_faults.h harness/gpu.h include/gdrapi.h \
		gdrsim/include/gdrsim.h | lib sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(REL_CFLAGS) -I$(CUDA_INCLUDE) $< -o $@ $(REL_LIBS)

# Each emulator setting that changes which driver calls the library makes ("vulkan": the
# Vulkan import, in $(SIM_VULKAN_ENV)).
REL_FAULT_CONFIGS := "" "GDRSIM_DRIVER_VERSION=2.4" "GDRSIM_DRIVER_VERSION=2.3" "GDRSIM_DMABUF=0" \
	"GDRSIM_PERSISTENT=0" "GDRSIM_PROFILE=coherent" "GDRSIM_NO_DEVICE=1 dmabuf" "vulkan"

test-faults: $(REL_OUT)/faults
	@fail=0; for cfg in $(REL_FAULT_CONFIGS); do set -- $$cfg; \
		case "$$1" in GDRSIM_*) envs=$$1; shift;; vulkan) envs="$(SIM_VULKAN_ENV)";; *) envs=;; esac; \
		echo "== faults $$(case "$$1" in vulkan) ;; *) echo "$${envs:-default}";; esac) $$*"; \
		env GDRAPI_TEST_OURS=1 $(SIM_ENV) $$envs timeout $(REL_TIMEOUT) $(REL_OUT)/faults "$$@" \
			> $(REL_OUT)/faults.log 2>&1; rc=$$?; \
		grep -A1 FAILED $(REL_OUT)/faults.log | head -6; grep -E '^faults:|passed' $(REL_OUT)/faults.log; \
		[ $$rc -eq 0 ] || { echo "   -> FAILED (exit $$rc)"; fail=1; }; \
	done; exit $$fail

TEST_TARGETS += test-faults
.PHONY: test-faults

# ---- threads and fork ----

STRESS_ROUNDS ?= 300
STRESS_THREADS ?= 8

test-stress: $(REL_OUT)/stress $(REL_OUT)/forkhold
	@fail=0; \
	GDRAPI_TEST_OURS=1 $(SIM_ENV) timeout $(REL_TIMEOUT) $(REL_OUT)/forkhold || fail=1; \
	GDRAPI_TEST_OURS=1 $(SIM_ENV) timeout $(REL_TIMEOUT) $(REL_OUT)/stress $(STRESS_ROUNDS) $(STRESS_THREADS) || fail=1; \
	GDRAPI_TEST_OURS=1 GDRSIM_NO_DEVICE=1 $(SIM_ENV) timeout $(REL_TIMEOUT) $(REL_OUT)/stress $(STRESS_ROUNDS) $(STRESS_THREADS) || fail=1; \
	GDRAPI_TEST_OURS=1 $(SIM_VULKAN_ENV) timeout $(REL_TIMEOUT) $(REL_OUT)/stress $(STRESS_ROUNDS) $(STRESS_THREADS) || fail=1; \
	exit $$fail

TEST_TARGETS += test-stress
.PHONY: test-stress

# ---- memory errors (valgrind memcheck) ----
# The C ABI suite's api, handles and threads programs and the reliability programs; any error,
# a definite leak, a crash or a timeout fails (failed assertions are left to the programs' own
# targets). The fork programs are left out: valgrind's fork of a process with
# the emulator's 1 GiB fake VRAM mapped takes about two minutes. --fair-sched=yes: valgrind runs
# one thread at a time, and with its default lock a thread that spins waiting for another
# (threads.c's race checks do) can keep the lock and starve it, past the timeout.

REL_VALGRIND := valgrind -q --fair-sched=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	--child-silent-after-fork=yes

test-memcheck: $(REL_OUT)/faults $(REL_OUT)/stress $(ABI_OUT)/api $(ABI_OUT)/handles $(ABI_OUT)/threads
	@fail=0; for p in "$(ABI_OUT)/api" "$(ABI_OUT)/handles" "$(ABI_OUT)/threads" \
		"$(REL_OUT)/stress 20 4 0" "GDRSIM_NO_DEVICE=1 $(REL_OUT)/stress 20 4 0" \
		"$(REL_OUT)/faults" "GDRSIM_NO_DEVICE=1 $(REL_OUT)/faults dmabuf noinit" \
		"vulkan $(REL_OUT)/stress 20 4 0" "vulkan $(REL_OUT)/faults vulkan noinit"; do \
		set -- $$p; label=; case "$$1" in GDRSIM_*) envs=$$1; shift;; vulkan) envs="$(SIM_VULKAN_ENV)"; label=vulkan; shift;; *) envs=;; esac; \
		env GDRAPI_TEST_OURS=1 $(SIM_ENV) $$envs timeout $(REL_TIMEOUT) $(REL_VALGRIND) "$$@" \
			> $(REL_OUT)/memcheck.log 2>&1; rc=$$?; \
		printf '%-60s %s\n' "memcheck $${label:-$$envs} $$*" "$$(tail -1 $(REL_OUT)/memcheck.log)"; \
		grep -E '^==[0-9]+==' $(REL_OUT)/memcheck.log | head -30; \
		if [ $$rc -eq 99 ]; then echo "   -> valgrind found errors"; fail=1; \
		elif [ $$rc -eq 1 ]; then echo "   -> (failed assertions: the suite's own target reports them)"; \
		elif [ $$rc -ne 0 ]; then echo "   -> the program failed (exit $$rc)"; fail=1; fi; \
	done; exit $$fail

TEST_TARGETS += test-memcheck
.PHONY: test-memcheck

# ---- races (ThreadSanitizer on the C harness) ----
# Only the C side is instrumented; see abi-tests/reliability/tsan.supp for why reports inside the
# Rust libraries are suppressed. No forks here: ThreadSanitizer does not support fork in a
# multithreaded process.

$(REL_OUT)/stress-tsan: $(REL_SRC)/stress.c harness/check.h harness/gpu.h include/gdrapi.h | lib sim
	@mkdir -p $(@D)
	$(FUZZ_CC) $(REL_CFLAGS) -fsanitize=thread -I$(CUDA_INCLUDE) $< -o $@ $(REL_LIBS)

test-races: $(REL_OUT)/stress-tsan
	GDRAPI_TEST_OURS=1 $(SIM_ENV) \
		TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$(CURDIR)/$(REL_SRC)/tsan.supp" \
		timeout $(REL_TIMEOUT) $(REL_OUT)/stress-tsan 200 8 0

TEST_TARGETS += test-races
.PHONY: test-races
