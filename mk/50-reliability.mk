# Reliability (RELIABILITY.md): the fuzz target (fuzz/), fault injection at every driver call,
# thread and fork stress, and memory-error and race checks of C programs (abi-tests/reliability).
#
# make test-fuzz         short fuzz smoke runs: fixed seed and corpus, FUZZ_SMOKE_RUNS inputs in each
#                        situation (FUZZ_SITUATIONS); the findings replayed in each
# make fuzz              long run: FUZZ_TIME seconds (default 600) in FUZZ_SITUATION (gdrdrv,
#                        gdrdrv-nonpersistent, dmabuf or vulkan; FUZZ_VULKAN=1 is vulkan), corpus kept
#                        in $(BUILD_DIR)/fuzz/corpus-<situation>
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
# The situations the library meets, each an environment of the instrumented library on the
# emulator; GDRAPI_FUZZ_SITUATION makes the target check that the library sees the same one.
#   gdrdrv                 /dev/gdrdrv, persistent mode
#   gdrdrv-nonpersistent   /dev/gdrdrv, GDRSIM_PERSISTENT=0 (freeing memory invalidates pins)
#   dmabuf                 no device node: the DMA-BUF backend (CUDA 13.3 and later)
#   vulkan                 the Vulkan import: its stand-in first on the path, SIM_VULKAN_VARS
#                          (GDRAPI_TEST_ALLOC=vmm makes the target allocate with cuMemCreate)
FUZZ_SITUATIONS := gdrdrv gdrdrv-nonpersistent dmabuf vulkan
FUZZ_VULKAN ?= 0
FUZZ_SITUATION ?= $(if $(filter 1,$(FUZZ_VULKAN)),vulkan,gdrdrv)
FUZZ_SIM_ENV = LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 LD_LIBRARY_PATH=$(FUZZ_OUT)/lib:$(SIM_DIR)
FUZZ_ENV_gdrdrv = $(FUZZ_SIM_ENV)
FUZZ_ENV_gdrdrv-nonpersistent = $(FUZZ_SIM_ENV) GDRSIM_PERSISTENT=0
FUZZ_ENV_dmabuf = $(FUZZ_SIM_ENV) GDRSIM_NO_DEVICE=1
FUZZ_ENV_vulkan = LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 \
	LD_LIBRARY_PATH=$(SIM_DIR)/vulkan:$(SIM_DIR):$(FUZZ_OUT)/lib $(SIM_VULKAN_VARS)
# The environment of situation $(1).
fuzz_env = $(FUZZ_ENV_$(1)) GDRAPI_FUZZ_SITUATION=$(1) \
	$(if $(filter 1,$(FUZZ_NO_MUNMAP)),GDRAPI_FUZZ_NO_MUNMAP_FAULTS=1)
FUZZ_OPTS := -timeout=10 -rss_limit_mb=2048 -max_len=1024 -print_final_stats=1
# libFuzzer's options in situation $(1): a crash or a broken invariant leaves crash-$(1)-*.
fuzz_flags = $(FUZZ_OPTS) -artifact_prefix=$(FUZZ_OUT)/crash-$(1)-

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

# One smoke run in situation $(1): a fixed seed over the committed corpus (a scratch copy:
# libFuzzer adds to it); its summary printed, its whole log when it fails.
fuzz_smoke = echo "== fuzz smoke: $(1)"; rm -rf $(FUZZ_OUT)/smoke-$(1) && \
	mkdir -p $(FUZZ_OUT)/smoke-$(1) && cp fuzz/corpus/* $(FUZZ_OUT)/smoke-$(1)/ && \
	env $(call fuzz_env,$(1)) timeout 300 $(FUZZ_OUT)/gdrapi_calls -seed=1 -runs=$(FUZZ_SMOKE_RUNS) \
		$(call fuzz_flags,$(1)) $(FUZZ_OUT)/smoke-$(1) > $(FUZZ_OUT)/smoke-$(1).log 2>&1 || \
		{ tail -40 $(FUZZ_OUT)/smoke-$(1).log; exit 1; }; \
	grep -E '^gdrapi_calls|DONE|^Done' $(FUZZ_OUT)/smoke-$(1).log;
# Each finding replayed once in situation $(1).
fuzz_replay = echo "== fuzz findings: $(1)"; \
	env $(call fuzz_env,$(1)) $(FUZZ_OUT)/gdrapi_calls $(wildcard fuzz/findings/*) \
		> $(FUZZ_OUT)/findings-$(1).log 2>&1 || { tail -40 $(FUZZ_OUT)/findings-$(1).log; exit 1; }; \
	grep -E '^gdrapi_calls|^Executed' $(FUZZ_OUT)/findings-$(1).log;

# Smoke runs in every situation, then the findings in every situation.
test-fuzz: fuzz-build
	@$(foreach sit,$(FUZZ_SITUATIONS),$(call fuzz_smoke,$(sit)))
	$(MAKE) --no-print-directory FUZZ_NO_MUNMAP=0 fuzz-replay

# Long run: FUZZ_TIME seconds in FUZZ_SITUATION; the corpus grows in $(FUZZ_OUT)/corpus-<situation>
# across runs.
fuzz: fuzz-build
	@case " $(FUZZ_SITUATIONS) " in *" $(FUZZ_SITUATION) "*) ;; \
		*) echo "FUZZ_SITUATION=$(FUZZ_SITUATION): one of $(FUZZ_SITUATIONS)"; exit 2;; esac
	mkdir -p $(FUZZ_OUT)/corpus-$(FUZZ_SITUATION) && cp -n fuzz/corpus/* $(FUZZ_OUT)/corpus-$(FUZZ_SITUATION)/
	env $(call fuzz_env,$(FUZZ_SITUATION)) $(FUZZ_OUT)/gdrapi_calls -max_total_time=$(FUZZ_TIME) \
		$(call fuzz_flags,$(FUZZ_SITUATION)) $(FUZZ_OUT)/corpus-$(FUZZ_SITUATION)

# The inputs that found library bugs or false stops of the model (fuzz/findings/), each replayed
# once with every fault allowed, in every situation.
fuzz-findings: fuzz-build
	$(MAKE) --no-print-directory FUZZ_NO_MUNMAP=0 fuzz-replay
fuzz-replay:
	@$(foreach sit,$(FUZZ_SITUATIONS),$(call fuzz_replay,$(sit)))

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
