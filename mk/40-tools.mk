# The tools: gdrcopy_copybw, gdrcopy_copylat, gdrcopy_apiperf and gdrcopy (doctor) in build/bin.
# They dlopen libcuda.so.1 and libgdrapi.so.2 at run time (no link dependency) and carry a
# RUNPATH of $ORIGIN/../lib (tools/build.rs): build/bin finds build/lib, an installed bin/ its
# prefix's lib/; LD_LIBRARY_PATH and LD_PRELOAD still come first.

TOOLS_BINS := gdrcopy_copybw gdrcopy_copylat gdrcopy_apiperf gdrcopy

tools:
	$(CARGO_BUILD) --release --locked -p gdrcopy-tools $(CARGO_TARGET_FLAG) $(CARGO_FLAGS)
	@mkdir -p $(BIN_DIR)
	for b in $(TOOLS_BINS); do install -m 755 $(CARGO_OUT)/$$b $(BIN_DIR)/$$b || exit 1; done
.PHONY: tools

# Unit tests of the tools' shared code, then the tools and the doctor run on the emulator
# (the emulator-backed tests are #[ignore]d in a plain `cargo test`, so they need this target).
test-tools: lib sim tools
	GDRCOPY_TEST_BIN_DIR=$(BIN_DIR) GDRCOPY_TEST_SIM_DIR=$(SIM_DIR) GDRCOPY_TEST_LIB_DIR=$(LIB_DIR) \
		$(CARGO) test --release --locked -p gdrcopy-tools $(CARGO_FLAGS) -- --include-ignored --test-threads=2
TEST_TARGETS += test-tools
.PHONY: test-tools
