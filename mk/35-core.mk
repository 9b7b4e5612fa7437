# make test-core: the library core's integration tests on the emulator (tests/emulator.rs):
# driver versions 2.0-2.6, open-failure log lines, gdr_close past failures, forked children.

test-core: sim
	GDRSIM_LIB=$(SIM_DIR)/libcuda.so.1 $(CARGO) test --locked -p gdrapi --test emulator $(CARGO_FLAGS) -- --ignored

TEST_TARGETS += test-core
.PHONY: test-core
