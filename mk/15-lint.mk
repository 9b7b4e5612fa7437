# make lint: rustfmt's layout on every crate of the workspace (`cargo fmt --all --check`; run
# `cargo fmt --all` to fix), then clippy with warnings as errors, under the workspace lints
# ([workspace.lints] in Cargo.toml: unsafe_op_in_unsafe_fn, undocumented_unsafe_blocks,
# missing_safety_doc), on every target of the crates in LINT_CRATES (default: the whole
# workspace); then the same clippy on the library and its tests as built for aarch64, whose
# code paths differ (the NEON kernels, the x86-only ones left out): without the Rust target
# it skips, or fails under CI (skip_or_fail).

LINT_CRATES ?= --workspace

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy $(LINT_CRATES) --all-targets --locked $(CARGO_FLAGS) -- -D warnings
	@if [ ! -d "$$(rustc --print sysroot)/lib/rustlib/$(AARCH64)" ]; then \
		$(call skip_or_fail,lint,the Rust target $(AARCH64) is not installed (rustup target add $(AARCH64))); \
	else \
		echo "$(CARGO) clippy -p gdrapi --all-targets --target $(AARCH64) --locked -- -D warnings"; \
		$(CARGO) clippy -p gdrapi --all-targets --target $(AARCH64) --locked $(CARGO_FLAGS) -- -D warnings; \
	fi
TEST_TARGETS += lint
.PHONY: lint
