# make lint: rustfmt's layout on every crate of the workspace (`cargo fmt --all --check`; run
# `cargo fmt --all` to fix), then clippy with warnings as errors, under the workspace lints
# ([workspace.lints] in Cargo.toml: unsafe_op_in_unsafe_fn, undocumented_unsafe_blocks,
# missing_safety_doc), on every target of the crates in LINT_CRATES (default: the whole
# workspace).

LINT_CRATES ?= --workspace

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy $(LINT_CRATES) --all-targets --locked $(CARGO_FLAGS) -- -D warnings
TEST_TARGETS += lint
.PHONY: lint
