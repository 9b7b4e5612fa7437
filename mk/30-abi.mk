# make test-abi: the C ABI test-suite (abi-tests/c, described in abi-tests/README.md).
# The header must compile cleanly in C and C++; the rest runs C programs
# against $(LIB_DIR)/libgdrapi.so.2 on the emulator.

ABI_SRC := abi-tests/c
ABI_OUT := $(BUILD_DIR)/abi
ABI_WARN := -Wall -Wextra -Werror
ABI_CFLAGS := -std=c11 $(ABI_WARN) -O1 -g -Iinclude -Iharness
ABI_SIM_CFLAGS := $(ABI_CFLAGS) -I$(CUDA_INCLUDE) -Igdrsim/include
ABI_SIM_LIBS := -L$(LIB_DIR) -lgdrapi -L$(SIM_DIR) -lcuda -lpthread -ldl
ABI_DEPS := include/gdrapi.h include/gdrconfig.h harness/check.h

ABI_HEADER_OBJS := $(addprefix $(ABI_OUT)/header/,gcc-c99.o gcc-c11.o gxx-c++11.o gxx-c++17.o link-c link-c++)
ABI_SIM_PROGS := $(addprefix $(ABI_OUT)/,api handles threads fork bar1)
ABI_PROGS := $(ABI_OUT)/layout $(ABI_SIM_PROGS) $(ABI_OUT)/log_probe \
	$(ABI_OUT)/fake/libgdrapi.so.2 $(ABI_OUT)/load_main $(ABI_OUT)/dlopen_main

# The header, compile only, with -pedantic (gdrcopy 2.6's own header passes it too).
$(ABI_OUT)/header/gcc-%.o: $(ABI_SRC)/header_compile.c $(ABI_DEPS)
	@mkdir -p $(@D)
	$(CC) -std=$* -pedantic $(ABI_WARN) -Iinclude -c $< -o $@
$(ABI_OUT)/header/gxx-%.o: $(ABI_SRC)/header_compile.c $(ABI_DEPS)
	@mkdir -p $(@D)
	$(CXX) -x c++ -std=$* -pedantic $(ABI_WARN) -Iinclude -c $< -o $@

# Linked against the library from C and C++: every function under its C name.
$(ABI_OUT)/header/link-c: $(ABI_SRC)/header_compile.c $(ABI_DEPS) | lib
	@mkdir -p $(@D)
	$(CC) -std=c11 $(ABI_WARN) -Iinclude -DHC_MAIN $< -o $@ -L$(LIB_DIR) -lgdrapi
$(ABI_OUT)/header/link-c++: $(ABI_SRC)/header_compile.c $(ABI_DEPS) | lib
	@mkdir -p $(@D)
	$(CXX) -x c++ -std=c++11 $(ABI_WARN) -Iinclude -DHC_MAIN $< -o $@ -L$(LIB_DIR) -lgdrapi

$(ABI_OUT)/layout: $(ABI_SRC)/layout.c $(ABI_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ABI_CFLAGS) $< -o $@

# Programs on the emulator: link against the library and the emulator's libcuda.
$(ABI_SIM_PROGS): $(ABI_OUT)/%: $(ABI_SRC)/%.c harness/gpu.h $(ABI_DEPS) | lib sim
	@test -n "$(CUDA_INCLUDE)" || { echo "cuda.h not found: set CUDA_INCLUDE (pip install nvidia-cuda-runtime)"; exit 1; }
	@mkdir -p $(@D)
	$(CC) $(ABI_SIM_CFLAGS) $< -o $@ $(ABI_SIM_LIBS)

$(ABI_OUT)/log_probe: $(ABI_SRC)/log_probe.c $(ABI_DEPS) | lib
	@mkdir -p $(@D)
	$(CC) $(ABI_CFLAGS) $< -o $@ -L$(LIB_DIR) -lgdrapi

$(ABI_OUT)/dlopen_main: $(ABI_SRC)/dlopen_main.c $(ABI_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ABI_CFLAGS) $< -o $@ -ldl

# A fake libgdrapi.so.2 (gdr_open returns NULL) and a program linked against it.
$(ABI_OUT)/fake/libgdrapi.so.2: $(ABI_SRC)/fake_gdrapi.c $(ABI_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ABI_CFLAGS) -fPIC -shared -Wl,-soname,libgdrapi.so.2 $< -o $@
	ln -sfn libgdrapi.so.2 $(@D)/libgdrapi.so
$(ABI_OUT)/load_main: $(ABI_SRC)/load_main.c $(ABI_OUT)/fake/libgdrapi.so.2 $(ABI_DEPS)
	$(CC) $(ABI_CFLAGS) $< -o $@ -L$(ABI_OUT)/fake -lgdrapi

abi-programs: $(ABI_HEADER_OBJS) $(ABI_PROGS)

# The declarations in include/gdrapi.h against the Rust FFI layer (cbindgen).
test-header-sync:
	$(CARGO) test --locked -p gdrapi --test header_sync $(CARGO_FLAGS)

# ABI_SUITES="api fork" picks suites; see abi-tests/README.md.
test-abi: lib sim abi-programs test-header-sync
	GDRAPI_TEST_OURS=1 SIM_VULKAN_VARS="$(SIM_VULKAN_VARS)" $(ABI_SRC)/run-all.sh $(ABI_OUT) $(LIB_DIR) $(SIM_DIR)

TEST_TARGETS += test-abi
.PHONY: test-abi test-header-sync abi-programs
