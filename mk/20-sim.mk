# The emulator: build/sim/libcuda.so.1 (fake CUDA driver plus /dev/gdrdrv).

sim: $(SIM_DIR)/libcuda.so.1

.PHONY: $(SIM_DIR)/libcuda.so.1
$(SIM_DIR)/libcuda.so.1:
	$(CARGO) build --release --locked -p gdrsim $(CARGO_FLAGS)
	@mkdir -p $(SIM_DIR)
	install -m 755 $(CARGO_TARGET_DIR)/release/libcuda.so $@
	ln -sfn libcuda.so.1 $(SIM_DIR)/libcuda.so
