# The library: build/lib/libgdrapi.so.2.6 with SONAME libgdrapi.so.2 and the two links.

lib: $(LIB_DIR)/$(LIB_REAL)

.PHONY: $(LIB_DIR)/$(LIB_REAL)
$(LIB_DIR)/$(LIB_REAL):
	$(CARGO_BUILD) --release --locked -p gdrapi $(CARGO_TARGET_FLAG) $(CARGO_FLAGS)
	@mkdir -p $(LIB_DIR)
	install -m 755 $(CARGO_OUT)/libgdrapi.so $@
	ln -sfn $(LIB_REAL) $(LIB_DIR)/$(LIB_SONAME)
	ln -sfn $(LIB_SONAME) $(LIB_DIR)/libgdrapi.so

# CUDA_INCLUDE: abi's declarations are compiled against the real cuda.h (abi/tests/cuda_header.rs).
test-rust:
	CUDA_INCLUDE="$(CUDA_INCLUDE)" $(CARGO) test --workspace --locked $(CARGO_FLAGS)
TEST_TARGETS += test-rust
.PHONY: test-rust
