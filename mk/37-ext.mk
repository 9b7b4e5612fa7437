# make ext: libgdrapi_ext.so.0 (include/gdrapi_ext.h: host-written GPU memory in one call), built
#   from ext/ into build/lib beside libgdrapi: libgdrapi_ext.so.$(EXT_VERSION) with SONAME
#   libgdrapi_ext.so.0, and the links libgdrapi_ext.so.0 and libgdrapi_ext.so. It needs
#   libgdrapi.so.2 (DT_NEEDED) and the C library only; libcuda is loaded at run time.
# make test-ext: its C suite on the emulator (abi-tests/ext, described in abi-tests/README.md)
#   on every backend: gdrdrv (default), DMA-BUF (GDRSIM_NO_DEVICE=1) and the Vulkan import
#   ($(SIM_VULKAN_ENV)'s situation): the API, 1000 flags from one pin written and read by both
#   sides, threads, fork, fault injection at every driver call, the header in C and C++, the
#   ELF facts of both libraries (libgdrapi.so.2 keeps exactly its symbols), valgrind.
# make test-rust-crate: the Rust crate gdrapi-rs (rust/), its tests and doc examples on the
#   emulator, on the same three backends.

EXT_VERSION := $(shell awk '/\#define GDRX_API_MAJOR_VERSION/ {a=$$3} /\#define GDRX_API_MINOR_VERSION/ {b=$$3} END {print a "." b}' include/gdrapi_ext.h 2>/dev/null)
EXT_REAL := libgdrapi_ext.so.$(EXT_VERSION)
EXT_SONAME := libgdrapi_ext.so.$(firstword $(subst ., ,$(EXT_VERSION)))

ext: $(LIB_DIR)/$(EXT_REAL)
# `make` builds it too.
all: ext

.PHONY: $(LIB_DIR)/$(EXT_REAL)
$(LIB_DIR)/$(EXT_REAL):
	$(CARGO_BUILD) --release --locked -p gdrapi-ext $(CARGO_TARGET_FLAG) $(CARGO_FLAGS)
	@mkdir -p $(LIB_DIR)
	install -m 755 $(CARGO_OUT)/libgdrapi_ext.so $@
	ln -sfn $(EXT_REAL) $(LIB_DIR)/$(EXT_SONAME)
	ln -sfn $(EXT_SONAME) $(LIB_DIR)/libgdrapi_ext.so

EXT_SRC := abi-tests/ext
EXT_OUT := $(BUILD_DIR)/ext
EXT_WARN := -Wall -Wextra -Werror
EXT_CFLAGS := -std=gnu11 $(EXT_WARN) -O1 -g -Iinclude -Iharness -Igdrsim/include
EXT_LIBS := -L$(LIB_DIR) -Wl,-rpath-link,$(LIB_DIR) -lgdrapi_ext -L$(SIM_DIR) -lcuda -lpthread -ldl
EXT_DEPS := $(EXT_SRC)/ext.h harness/check.h harness/check_cases.h harness/check_faults.h harness/gpu.h include/gdrapi_ext.h \
	gdrsim/include/gdrsim.h
EXT_PROGS := $(addprefix $(EXT_OUT)/,ext_test ext_faults flags)
EXT_HEADER := $(addprefix $(EXT_OUT)/header/,gcc-c99.o gcc-c11.o gxx-c++11.o gxx-c++17.o link-c link-c++)

$(EXT_PROGS): $(EXT_OUT)/%: $(EXT_SRC)/%.c $(EXT_DEPS) | ext sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(EXT_CFLAGS) -I$(CUDA_INCLUDE) $< -o $@ $(EXT_LIBS)

# The header, compile only, with -pedantic, then linked from C and C++.
$(EXT_OUT)/header/gcc-%.o: $(EXT_SRC)/header_compile.c include/gdrapi_ext.h include/gdrapi.h
	@mkdir -p $(@D)
	$(CC) -std=$* -pedantic $(EXT_WARN) -Iinclude -c $< -o $@
$(EXT_OUT)/header/gxx-%.o: $(EXT_SRC)/header_compile.c include/gdrapi_ext.h include/gdrapi.h
	@mkdir -p $(@D)
	$(CXX) -x c++ -std=$* -pedantic $(EXT_WARN) -Iinclude -c $< -o $@
$(EXT_OUT)/header/link-c: $(EXT_SRC)/header_compile.c include/gdrapi_ext.h | ext
	@mkdir -p $(@D)
	$(CC) -std=c11 $(EXT_WARN) -Iinclude -DHC_MAIN $< -o $@ -L$(LIB_DIR) -Wl,-rpath-link,$(LIB_DIR) -lgdrapi_ext
$(EXT_OUT)/header/link-c++: $(EXT_SRC)/header_compile.c include/gdrapi_ext.h | ext
	@mkdir -p $(@D)
	$(CXX) -x c++ -std=c++11 $(EXT_WARN) -Iinclude -DHC_MAIN $< -o $@ -L$(LIB_DIR) -Wl,-rpath-link,$(LIB_DIR) -lgdrapi_ext

ext-programs: $(EXT_PROGS) $(EXT_HEADER)

# EXT_SUITES="api faults" picks parts (abi-tests/ext/run.sh); EXT_VALGRIND=0 leaves valgrind out.
test-ext: lib sim ext ext-programs
	EXT_SUITES="$(EXT_SUITES)" EXT_VALGRIND="$(EXT_VALGRIND)" $(EXT_SRC)/run.sh $(EXT_OUT) $(LIB_DIR) $(SIM_DIR)

TEST_TARGETS += test-ext
.PHONY: ext ext-programs test-ext

# ---- the Rust crate (rust/, package gdrapi-rs) ----
# The emulator goes into the processes cargo runs (tests, doc examples, examples), never into
# cargo or rustc themselves: through the target runner, which cargo also uses for doc tests.
RUST_CRATE_HOST := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
RUST_CRATE_RUNNER_VAR := CARGO_TARGET_$(shell echo '$(RUST_CRATE_HOST)' | tr 'a-z.-' 'A-Z__')_RUNNER
RUST_CRATE_RUNNER = env LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 LD_LIBRARY_PATH=$(SIM_DIR)/vulkan:$(SIM_DIR):$(LIB_DIR)

# Tests, doc examples and examples on each backend; then the documentation with warnings as
# errors, and `cargo package` (which builds the packaged crate on its own).
test-rust-crate: lib sim ext
	@fail=0; for b in gdrdrv dmabuf vulkan; do \
		case $$b in gdrdrv) e=;; dmabuf) e="GDRSIM_NO_DEVICE=1";; \
		vulkan) e="GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRAPI_USE_VULKAN=1";; esac; \
		echo "== gdrapi-rs on the $$b backend"; \
		run=(env $$e GDRAPI_RS_TEST=1 GDRAPI_RS_TEST_BACKEND=$$b $(RUST_CRATE_RUNNER_VAR)="$(RUST_CRATE_RUNNER)"); \
		"$${run[@]}" $(CARGO) test --locked -q -p gdrapi-rs $(CARGO_FLAGS) || fail=1; \
		for x in flags pin; do "$${run[@]}" $(CARGO) run --locked -q -p gdrapi-rs --example $$x $(CARGO_FLAGS) || fail=1; done; \
	done; \
	echo "== gdrapi-rs: documentation (warnings are errors) and cargo package"; \
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --locked -q --no-deps -p gdrapi-rs $(CARGO_FLAGS) || fail=1; \
	$(CARGO) package --locked -q -p gdrapi-rs --allow-dirty $(CARGO_FLAGS) || fail=1; \
	if [ $$fail -eq 0 ]; then echo "test-rust-crate: passed on gdrdrv, dma-buf and vulkan"; fi; exit $$fail

TEST_TARGETS += test-rust-crate
.PHONY: test-rust-crate
