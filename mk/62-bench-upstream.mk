# NVIDIA's own instruments against both libraries (bench/upstream/).
#
# make bench-upstream UPSTREAM_TESTS=<dir> UPSTREAM_LIB_DIR=<dir>: gdrcopy 2.6's
#   gdrcopy_copylat, gdrcopy_copybw and gdrcopy_apiperf (built by the user from gdrcopy's
#   source; never fetched here) run against this library and against the libgdrapi.so.2 in
#   UPSTREAM_LIB_DIR, in BENCH_ROUNDS alternating rounds (default 5), each process pinned to
#   one CPU near the GPU (BENCH_CPU=auto, a number, or none), with an A/A control arm (the
#   upstream library twice) that shows the spread of identical code. Prints per size and
#   direction each library's median and the min/median/max of the per-round ratio, a verdict
#   per row, the rank test, and per tool and direction how many rows are below 1.0 with the
#   chance of that many for identical code (the direction check). Runs on the
#   emulator (its GDRSIM_* settings pass through, GDRSIM_BACKING=vulkan gives real VRAM);
#   BENCH_SIM=0 runs on a machine with the real gdrdrv and CUDA. BENCH_UPSTREAM_ARGS adds
#   options (--quick, --tools copylat,apiperf, --json FILE; compare.py --help).
# make bench-upstream-aa UPSTREAM_TESTS=<dir> UPSTREAM_LIB_DIR=<dir>: the same run with a copy
#   of the upstream library in place of this one: how many rows identical code puts below the
#   A/A spread, behind in every round, and in a consistent deficit, by chance (the calibration
#   of the verdicts).
# make bench-drivercalls UPSTREAM_LIB_DIR=<dir>: the open/ioctl/mmap/munmap/close calls each
#   API function makes, for both libraries side by side.
# make bench-vkimport [PREBUILT=1]: on a GPU machine, this library over two routes to real
#   VRAM, with this project's tools (build/bin) as the test programs, in compare.py's
#   alternating rounds: "vulkan-import", the Vulkan import backend with no emulator
#   (GDRAPI_USE_VULKAN=1, the tools allocating with -a cuMemCreateFd), against
#   "emulator-vulkan", the emulator's Vulkan backing (GDRSIM_BACKING=vulkan
#   GDRSIM_VRAM_SIZE=$(BENCH_VKIMPORT_VRAM), -a cuMemAlloc), with the A/A control arm
#   (emulator-vulkan again), BENCH_ROUNDS rounds, BENCH_CPU, and the direction check also over
#   sizes up to 4 KiB. BENCH_VKIMPORT_TOOLS picks the tools (default copylat; any of
#   copylat,copybw,apiperf), BENCH_VKIMPORT_<tool> their arguments before -a, and
#   BENCH_VKIMPORT_ARGS adds compare.py options (--json FILE, --quick has no effect on the
#   tools given arguments here). Without a GPU (no /dev/nvidia0 and no working nvidia-smi) it
#   says so and passes. PREBUILT=1 builds nothing, for a GPU machine without the Rust
#   toolchain that is given the build/ folder made elsewhere.
# make test-bench-upstream: compare.py's and apiab_orders.py's unit tests (test_compare.py,
#   test_apiab_orders.py in bench/upstream); the harness itself on the emulator, with this
#   project's tools (they take upstream's flags and print its result lines) as the test
#   programs and this library on both arms, one quick round, its verdicts and direction checks
#   read back from its JSON file; apiab (split, four slots, counters) and apiab_orders.py's
#   summary on the emulator; the driver-call
#   counts of this library against bench/upstream/drivercalls.expected, so that an extra
#   driver call fails the suite; the freshness check (bench-freshness), the API cost program
#   (bench-apicost) and the reads after writes (bench-readafter) on the emulator; and the
#   footprint of each API call against bench/upstream/footprint.expected.

BENCH_ROUNDS ?= 5
BENCH_CPU ?= auto
BENCH_SIM ?= 1
BENCH_UPSTREAM_ARGS ?=
BENCH_UP_OUT := $(BUILD_DIR)/bench-upstream
BENCH_COMPARE := python3 bench/upstream/compare.py --rounds $(BENCH_ROUNDS) --cpu $(BENCH_CPU) \
	$(if $(filter 1,$(BENCH_SIM)),--sim $(SIM_DIR))

BENCH_VKIMPORT_TOOLS ?= copylat
BENCH_VKIMPORT_ARGS ?=
BENCH_VKIMPORT_VRAM ?= 256M
# Each tool's arguments on both arms, before the allocation function, which differs
# (compare.py's defaults; apiperf's are those of PERFORMANCE.md's runs over real VRAM, where
# map and unmap cost milliseconds).
BENCH_VKIMPORT_copylat ?= -s 1048576
BENCH_VKIMPORT_copybw ?= -s 1048576 -c 1048576 -l
BENCH_VKIMPORT_apiperf ?= -s 65536 -n 300
# Whether this machine has an NVIDIA GPU (expanded when bench-vkimport's recipe runs).
have_nvidia_gpu = $(shell { test -e /dev/nvidia0 || nvidia-smi -L; } >/dev/null 2>&1 && echo yes)
BENCH_VKIMPORT = python3 bench/upstream/compare.py --rounds $(BENCH_ROUNDS) --cpu $(BENCH_CPU) \
	--control --tests $(BIN_DIR) --ours $(LIB_DIR) --upstream $(LIB_DIR) \
	--names vulkan-import,emulator-vulkan --sim $(SIM_DIR) --sim-arms upstream \
	--tools $(BENCH_VKIMPORT_TOOLS) --ours-env GDRAPI_USE_VULKAN=1 \
	--upstream-env GDRSIM_BACKING=vulkan --upstream-env GDRSIM_VRAM_SIZE=$(BENCH_VKIMPORT_VRAM) \
	$(foreach t,$(subst $(,), ,$(BENCH_VKIMPORT_TOOLS)), \
		--ours-args '$(t)=$(BENCH_VKIMPORT_$(t)) -a cuMemCreateFd' \
		--upstream-args '$(t)=$(BENCH_VKIMPORT_$(t)) -a cuMemAlloc') \
	--direction-max-size 4096 $(BENCH_VKIMPORT_ARGS)

# $(call bench_program,<link flags>): the recipe of a program of bench/upstream/ (the target,
# from its .c file, the first prerequisite) built against cuda.h.
define bench_program
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Werror -Iinclude -Iharness -I$(CUDA_INCLUDE) $< -o $@ $(1)
endef

# $(call each_library,<command>,<on failure: exit 1 or true>): the command with this library,
# then with the one in UPSTREAM_LIB_DIR when it is set, each first named, on the emulator
# unless BENCH_SIM=0.
define each_library
	@for d in $(LIB_DIR) $(if $(UPSTREAM_LIB_DIR),$(abspath $(UPSTREAM_LIB_DIR))); do \
		echo "== $$d/libgdrapi.so.2"; \
		$(if $(filter 1,$(BENCH_SIM)),LD_PRELOAD=$(SIM_DIR)/libcuda.so.1) LD_LIBRARY_PATH=$(SIM_DIR):$$d \
			$(1) || $(2); \
	done
endef

# The one CPU a benchmark in one process runs on (BENCH_CPU, CPU 1 for auto).
BENCH_TASKSET = taskset -c $(if $(filter auto,$(BENCH_CPU)),1,$(BENCH_CPU))

$(BENCH_UP_OUT)/drivercalls: bench/upstream/drivercalls.c harness/gpu.h include/gdrapi.h | lib sim
	$(call bench_program,-L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda -ldl)

# The recipe lines bench-upstream and bench-upstream-aa share: the check of their variables,
# and NVIDIA's tools with the library in folder $(1) as "ours".
define bench_compare_against_upstream
	@test -n "$(UPSTREAM_TESTS)" -a -n "$(UPSTREAM_LIB_DIR)" || { \
		echo "$@: set UPSTREAM_TESTS=<folder of gdrcopy 2.6's gdrcopy_copylat, _copybw, _apiperf>"; \
		echo "  and UPSTREAM_LIB_DIR=<folder holding gdrcopy 2.6's libgdrapi.so.2>, both built from gdrcopy's source"; \
		exit 2; }
	$(if $(2),$(2))
	$(BENCH_COMPARE) --control --tests $(abspath $(UPSTREAM_TESTS)) --ours $(1) \
		--upstream $(abspath $(UPSTREAM_LIB_DIR)) $(BENCH_UPSTREAM_ARGS)
endef

# $(call aa_copy,<folder holding a libgdrapi.so.2>[,<name>]): a copy of that library in
# $(BENCH_UP_OUT)/<name> (default aa), a second file that the loader takes for another library
# (an A/A arm; aa-ours: this library's copy, apiab's fourth slot).
aa_copy = mkdir -p $(BENCH_UP_OUT)/$(or $(2),aa) && cp -L $(1)/libgdrapi.so.2 $(BENCH_UP_OUT)/$(or $(2),aa)/libgdrapi.so.2

bench-upstream: lib $(if $(filter 1,$(BENCH_SIM)),sim)
	$(call bench_compare_against_upstream,$(LIB_DIR))

bench-upstream-aa: $(if $(filter 1,$(BENCH_SIM)),sim)
	$(call bench_compare_against_upstream,$(BENCH_UP_OUT)/aa,$(call aa_copy,$(abspath $(UPSTREAM_LIB_DIR))))

bench-vkimport: $(if $(PREBUILT),,tools lib sim)
	$(if $(have_nvidia_gpu),$(BENCH_VKIMPORT),@echo "bench-vkimport: skipped: no GPU (no /dev/nvidia0$(,) no working nvidia-smi)")

bench-drivercalls: $(BENCH_UP_OUT)/drivercalls
	$(call each_library,$(BENCH_UP_OUT)/drivercalls,exit 1)

test-bench-upstream: $(BENCH_UP_OUT)/drivercalls $(BENCH_UP_OUT)/freshness $(BENCH_UP_OUT)/apicost \
		$(BENCH_UP_OUT)/footprint $(BENCH_UP_OUT)/apiab $(BENCH_UP_OUT)/ioctlstamp.so $(BENCH_UP_OUT)/copyab \
		$(BENCH_UP_OUT)/readafter tools
	@if command -v valgrind >/dev/null; then \
		$(FOOTPRINT) --check bench/upstream/footprint.expected $(LIB_DIR); \
	else $(call skip_or_fail,test-bench-upstream footprint,valgrind (Debian package valgrind)); fi
	$(SIM_ENV) $(BENCH_UP_OUT)/freshness 50
	$(SIM_ENV) $(BENCH_UP_OUT)/apicost 20 8
	$(SIM_ENV) $(BENCH_UP_OUT)/readafter 20 10 > $(BENCH_UP_OUT)/readafter.out
	@grep -Eq '^131072 +[0-9]+ +[0-9]+ +[0-9.]+$$' $(BENCH_UP_OUT)/readafter.out \
		|| { cat $(BENCH_UP_OUT)/readafter.out; echo "test-bench-upstream: readafter printed no 128 KiB row"; exit 1; }
	@$(call aa_copy,$(LIB_DIR))
	@# With ioctlstamp.so preloaded: the ratios, and the split's three rows per library for pin,
	@# get_info and unpin, the driver's time positive.
	LD_PRELOAD="$(BENCH_UP_OUT)/ioctlstamp.so $(SIM_DIR)/libcuda.so.1" LD_LIBRARY_PATH=$(SIM_DIR):$(LIB_DIR) \
		$(BENCH_UP_OUT)/apiab 20 $(LIB_DIR)/libgdrapi.so.2 $(BENCH_UP_OUT)/aa/libgdrapi.so.2 \
		$(BENCH_UP_OUT)/aa/libgdrapi.so.2 > $(BENCH_UP_OUT)/apiab.out
	@grep -Eq '^get_info +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+$$' $(BENCH_UP_OUT)/apiab.out \
		|| { cat $(BENCH_UP_OUT)/apiab.out; echo "test-bench-upstream: apiab printed no get_info row"; exit 1; }
	@test "$$(grep -Ec "^(pin|get_info|unpin) +(A|B|B') +[0-9]+ +[1-9][0-9]* +[0-9]+$$" $(BENCH_UP_OUT)/apiab.out)" = 9 \
		|| { cat $(BENCH_UP_OUT)/apiab.out; echo "test-bench-upstream: apiab with ioctlstamp.so printed no split rows"; exit 1; }
	@$(call aa_copy,$(LIB_DIR),aa-ours)
	$(SIM_ENV) $(BENCH_UP_OUT)/apiab 20 $(LIB_DIR)/libgdrapi.so.2 $(BENCH_UP_OUT)/aa/libgdrapi.so.2 \
		$(BENCH_UP_OUT)/aa/libgdrapi.so.2 $(BENCH_UP_OUT)/aa-ours/libgdrapi.so.2 > $(BENCH_UP_OUT)/apiab4.out
	@grep -Eq '^get_info +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$$' $(BENCH_UP_OUT)/apiab4.out \
		|| { cat $(BENCH_UP_OUT)/apiab4.out; echo "test-bench-upstream: apiab with four libraries printed no pooled ratio"; exit 1; }
	python3 bench/upstream/apiab_orders.py 2 10 $(LIB_DIR)/libgdrapi.so.2 $(BENCH_UP_OUT)/aa-ours/libgdrapi.so.2 \
		$(BENCH_UP_OUT)/aa/libgdrapi.so.2 $(BENCH_UP_OUT)/aa/libgdrapi.so.2 -- env $(SIM_ENV) $(BENCH_UP_OUT)/apiab \
		> $(BENCH_UP_OUT)/apiab-orders.out
	@test "$$(grep -c '^== run [12] of 2' $(BENCH_UP_OUT)/apiab-orders.out)" = 2 \
		&& test "$$(grep -Ec '^(pin|map|get_info|unmap|unpin) +[0-9.]+ +[0-9.]+-[0-9.]+ +[0-9.]+-[0-9.]+ +[0-9]+ of 2 +- +too few runs$$' $(BENCH_UP_OUT)/apiab-orders.out)" = 5 \
		|| { cat $(BENCH_UP_OUT)/apiab-orders.out; echo "test-bench-upstream: apiab_orders.py printed no summary"; exit 1; }
	@# The counters' path, with the kernel's software counters (no PMU here); a machine that
	@# refuses perf_event_open must get the message and exit status 2.
	@rc=0; APIAB_PMU=sw $(SIM_ENV) $(BENCH_UP_OUT)/apiab 5 $(LIB_DIR)/libgdrapi.so.2 $(BENCH_UP_OUT)/aa/libgdrapi.so.2 \
		> $(BENCH_UP_OUT)/apiab-pmu.out || rc=$$?; \
	if [ $$rc = 0 ]; then \
		test "$$(grep -Ec '^(pin|map|get_info|unmap|unpin) +(task-clock|page-faults|cs) +[0-9.]+ +[0-9.]+$$' $(BENCH_UP_OUT)/apiab-pmu.out)" = 15 \
		|| { cat $(BENCH_UP_OUT)/apiab-pmu.out; echo "test-bench-upstream: apiab printed no counter rows"; exit 1; }; \
	else \
		test $$rc = 2 && grep -q '^apiab: no PMU counters for APIAB_PMU=sw: ' $(BENCH_UP_OUT)/apiab-pmu.out \
		|| { cat $(BENCH_UP_OUT)/apiab-pmu.out; echo "test-bench-upstream: apiab with counters: exit status $$rc"; exit 1; }; \
		echo "test-bench-upstream: no perf_event_open here; apiab said so"; \
	fi
	$(SIM_ENV) $(BENCH_UP_OUT)/copyab 5 $(LIB_DIR)/libgdrapi.so.2 $(BENCH_UP_OUT)/aa/libgdrapi.so.2 \
		$(BENCH_UP_OUT)/aa/libgdrapi.so.2 > $(BENCH_UP_OUT)/copyab.out
	@test "$$(grep -Ec '^4096( +[0-9.]+){$(COPYAB_COLUMNS)}$$' $(BENCH_UP_OUT)/copyab.out)" = 2 \
		&& test "$$(grep -c '^direction: .* sizes with B/A below 1.0 (control' $(BENCH_UP_OUT)/copyab.out)" = 2 \
		|| { cat $(BENCH_UP_OUT)/copyab.out; echo "test-bench-upstream: copyab printed no 4 KiB rows of $(COPYAB_COLUMNS) figures or no direction lines"; exit 1; }
	$(SIM_ENV) $(BENCH_UP_OUT)/drivercalls > $(BENCH_UP_OUT)/drivercalls.out
	diff -u bench/upstream/drivercalls.expected $(BENCH_UP_OUT)/drivercalls.out
	cd bench/upstream && python3 -m unittest -q test_compare test_apiab_orders
	python3 bench/upstream/compare.py --rounds 1 --quick --cpu auto --sim $(SIM_DIR) --control \
		--tests $(BIN_DIR) --ours $(LIB_DIR) --upstream $(LIB_DIR) --direction-max-size 4096 \
		--json $(BENCH_UP_OUT)/smoke.json
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); rows=j["rows"]; \
		tools={r["tool"] for r in rows}; \
		verdicts={r.get("verdict") for r in rows}; \
		(tools=={"copylat","copybw","apiperf"} and len(rows)>=30 \
		and verdicts <= {"ahead","within A/A","BELOW A/A"}) or sys.exit( \
		"test-bench-upstream: expected rows with verdicts from all three tools, got %d rows from %s, verdicts %s" \
		% (len(rows), sorted(tools), sorted(map(str, verdicts)))); \
		d={(c["label"], c["max_size"]) for c in j["direction"] \
		if c["verdict"] in ("CONSISTENT DEFICIT","no consistent deficit") and c["aa_below"] is not None}; \
		want={(l, m) for l in ("copylat gdr_copy_to_mapping","copylat gdr_copy_from_mapping", \
		"copybw write","copybw read") for m in (None, 4096)}; \
		sys.exit(0 if want <= d and ("apiperf pin", None) in d else \
		"test-bench-upstream: expected direction checks of each direction, all sizes and up to 4096, got %s" \
		% sorted(map(str, d)))' \
		$(BENCH_UP_OUT)/smoke.json

TEST_TARGETS += test-bench-upstream
.PHONY: bench-upstream bench-upstream-aa bench-vkimport bench-drivercalls test-bench-upstream

# make bench-freshness [UPSTREAM_LIB_DIR=<dir>]: does a read through the mapping return what
#   the GPU wrote last (bench/upstream/freshness.c)? Meaningful on device memory behind a BAR
#   (GDRSIM_BACKING=vulkan on a GPU machine); on the emulator's ordinary memory a smoke test.
bench-freshness: $(BENCH_UP_OUT)/freshness
	$(call each_library,$(BENCH_UP_OUT)/freshness $(FRESHNESS_ITERS),true)

$(BENCH_UP_OUT)/freshness: bench/upstream/freshness.c bench/upstream/timing.h harness/gpu.h include/gdrapi.h | lib sim
	$(call bench_program,-L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda)

FRESHNESS_ITERS ?= 2000
.PHONY: bench-freshness

# make bench-apicost [UPSTREAM_LIB_DIR=<dir>]: the CPU time of pin, get_info, map, unmap and
#   unpin with warm caches and after evicting them (bench/upstream/apicost.c), for this library
#   and the other one: apiperf times calls that follow a slow map or unmap, with cold caches.
APICOST_ARGS ?= 2000 128
bench-apicost: $(BENCH_UP_OUT)/apicost
	$(call each_library,$(BENCH_UP_OUT)/apicost $(APICOST_ARGS),exit 1)

$(BENCH_UP_OUT)/apicost: bench/upstream/apicost.c bench/upstream/timing.h bench/upstream/evict.h harness/gpu.h include/gdrapi.h | lib sim
	$(call bench_program,-L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda)
.PHONY: bench-apicost

# make bench-readafter [UPSTREAM_LIB_DIR=<dir>]: reads through a mapping on a fresh mapping
#   and after copylat's write pass, one process per library (bench/upstream/readafter.c): on
#   memory the CPU caches, the lines a library's writes leave dirty slow the reads that follow.
READAFTER_ARGS ?= 1000 10000
bench-readafter: $(BENCH_UP_OUT)/readafter
	$(call each_library,$(BENCH_TASKSET) $(BENCH_UP_OUT)/readafter $(READAFTER_ARGS),exit 1)

$(BENCH_UP_OUT)/readafter: bench/upstream/readafter.c bench/upstream/timing.h harness/gpu.h include/gdrapi.h | lib sim
	$(call bench_program,-L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda)
.PHONY: bench-readafter

# make bench-apiab UPSTREAM_LIB_DIR=<dir>: apiperf's cycle for this library, the other one, a
#   copy of the other one (the A/A control) and a copy of this one (loaded last, so that both
#   libraries average the same place in the load order) in one process, interleaved cycle by
#   cycle (bench/upstream/apiab.c): what differs between their times is their code, not the run.
#   APIAB_SPLIT=1 preloads ioctlstamp.so (bench/upstream/ioctlstamp.c) and adds, for pin,
#   get_info and unpin, each library's time before its ioctl, in it and after it.
#   APIAB_RUNS=N runs it N times, the two libraries' load order alternating, and summarises the
#   other library's time / ours per call over the runs: median, range, A/A range, runs won, and
#   an interval holding the median with 95 % confidence (six runs at least) with its verdict,
#   ahead, behind or level (bench/upstream/apiab_orders.py).
APIAB_ITERS ?= 2000
APIAB_SPLIT ?=
APIAB_RUNS ?=
APIAB_PRELOAD = $(if $(filter 1,$(APIAB_SPLIT)),$(BENCH_UP_OUT)/ioctlstamp.so) \
	$(if $(filter 1,$(BENCH_SIM)),$(SIM_DIR)/libcuda.so.1)
APIAB_RUN = env LD_PRELOAD="$(strip $(APIAB_PRELOAD))" LD_LIBRARY_PATH=$(SIM_DIR) \
	$(BENCH_TASKSET) $(BENCH_UP_OUT)/apiab
bench-apiab: $(BENCH_UP_OUT)/apiab $(BENCH_UP_OUT)/ioctlstamp.so
	@test -n "$(UPSTREAM_LIB_DIR)" || { echo "bench-apiab: set UPSTREAM_LIB_DIR=<dir of the other libgdrapi.so.2>"; exit 2; }
	@$(call aa_copy,$(abspath $(UPSTREAM_LIB_DIR)))
	@$(call aa_copy,$(LIB_DIR),aa-ours)
	$(if $(APIAB_RUNS),python3 bench/upstream/apiab_orders.py $(APIAB_RUNS) $(APIAB_ITERS) \
		$(LIB_DIR)/libgdrapi.so.2 $(BENCH_UP_OUT)/aa-ours/libgdrapi.so.2 \
		$(abspath $(UPSTREAM_LIB_DIR))/libgdrapi.so.2 $(BENCH_UP_OUT)/aa/libgdrapi.so.2 -- $(APIAB_RUN), \
		$(APIAB_RUN) $(APIAB_ITERS) \
		$(LIB_DIR)/libgdrapi.so.2 $(abspath $(UPSTREAM_LIB_DIR))/libgdrapi.so.2 $(BENCH_UP_OUT)/aa/libgdrapi.so.2 \
		$(BENCH_UP_OUT)/aa-ours/libgdrapi.so.2)

# make bench-copyab UPSTREAM_LIB_DIR=<dir>: copylat's sizes (1 B to 4 KiB) written and read
#   through this library, the other one and a copy of the other one (the A/A control) in one
#   process, on one device buffer, interleaved batch by batch (bench/upstream/copyab.c), with
#   the floor on x86-64 (the same copies by straight code in the program: MOVNTDQ or MOVNTDQA
#   and SFENCE, no library call); COPYAB_ROUNDS batches per library and size; COPYAB_FLOOR=0
#   in the environment leaves the floor out.
COPYAB_ROUNDS ?= 2000
# The figures of a copyab row with the control: the floor's three more where it has one (x86-64).
COPYAB_COLUMNS := $(if $(filter x86_64,$(shell uname -m)),7,4)
bench-copyab: $(BENCH_UP_OUT)/copyab
	@test -n "$(UPSTREAM_LIB_DIR)" || { echo "bench-copyab: set UPSTREAM_LIB_DIR=<dir of the other libgdrapi.so.2>"; exit 2; }
	@$(call aa_copy,$(abspath $(UPSTREAM_LIB_DIR)))
	$(if $(filter 1,$(BENCH_SIM)),LD_PRELOAD=$(SIM_DIR)/libcuda.so.1) LD_LIBRARY_PATH=$(SIM_DIR) \
		$(BENCH_TASKSET) $(BENCH_UP_OUT)/copyab $(COPYAB_ROUNDS) \
		$(LIB_DIR)/libgdrapi.so.2 $(abspath $(UPSTREAM_LIB_DIR))/libgdrapi.so.2 $(BENCH_UP_OUT)/aa/libgdrapi.so.2

$(BENCH_UP_OUT)/copyab: bench/upstream/copyab.c bench/upstream/timing.h harness/gpu.h include/gdrapi.h | lib sim
	$(call bench_program,-L$(SIM_DIR) -lcuda -ldl)
.PHONY: bench-copyab

$(BENCH_UP_OUT)/ioctlstamp.so: bench/upstream/ioctlstamp.c bench/upstream/timing.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -shared -fPIC $< -o $@ -ldl

$(BENCH_UP_OUT)/apiab: bench/upstream/apiab.c bench/upstream/timing.h bench/upstream/evict.h bench/upstream/pmu.h harness/gpu.h include/gdrapi.h | lib sim
	$(call bench_program,-L$(SIM_DIR) -lcuda -ldl)
.PHONY: bench-apiab

# make bench-footprint [UPSTREAM_LIB_DIR=<dir>]: the code and data each API call touches (pages,
#   cache lines, functions, instructions) under valgrind's lackey, for this library and the
#   other one side by side (bench/upstream/footprint.c, footprint.py). apiperf times pin,
#   get_info and unpin right after a slow map or unmap, with cold TLBs and caches, where a
#   call costs about one page walk per page it touches.
FOOTPRINT = python3 bench/upstream/footprint.py --exe $(BENCH_UP_OUT)/footprint --sim $(SIM_DIR)
bench-footprint: $(BENCH_UP_OUT)/footprint
	@$(FOOTPRINT) $(LIB_DIR) $(if $(UPSTREAM_LIB_DIR),$(abspath $(UPSTREAM_LIB_DIR)))

$(BENCH_UP_OUT)/footprint: bench/upstream/footprint.c harness/gpu.h include/gdrapi.h | lib sim
	$(call bench_program,-L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda)
.PHONY: bench-footprint
