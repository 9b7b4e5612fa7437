# The tools: gdrcopy_copybw, gdrcopy_copylat, gdrcopy_apiperf and gdrcopy (doctor) in build/bin.

tools:
	@mkdir -p $(BIN_DIR)
.PHONY: tools
