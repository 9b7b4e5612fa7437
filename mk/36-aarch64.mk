# make test-aarch64: the library's unit tests built for aarch64 and run under qemu-user, so that
#   the NEON kernels and every aarch64-only path run, not only type-check (the portable family
#   included); then the full copy sweep (every size 0..4160 x every device and host offset
#   0..63, guard pages) of the NEON family in release mode, in two halves that run at once. The
#   portable family's full sweep is the same source and runs natively in make test-copy. Needs the Rust target aarch64-unknown-linux-gnu and
#   Debian's qemu-user, gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (.ci/apt-packages;
#   .ci/run adds the Rust target); without the Rust target or qemu it says so and passes, as
#   there is nothing to run, except with CI set, where it fails (skip_or_fail, Makefile).
#   Five tests are skipped there, for what qemu-user does that a kernel does not: it answers an
#   ioctl it does not know with ENOSYS, where a kernel answers ENOTTY
#   (open_failures_are_errors_with_a_fix_hint checks the latter); and it accepts
#   madvise(MADV_WIPEONFORK) without wiping the pages in a child, which the three tests of
#   wipe-on-fork memory (sys, process and registry) and the session's refusal of a child made
#   by a raw clone (which only that wiping tells from its parent) check.

AARCH64 := aarch64-unknown-linux-gnu
AARCH64_ENV := CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
	CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
AARCH64_TEST = $(AARCH64_ENV) $(CARGO) test --locked -p gdrapi --lib --target $(AARCH64) $(CARGO_FLAGS)

.PHONY: test-aarch64
test-aarch64:
	@if [ ! -d "$$(rustc --print sysroot)/lib/rustlib/$(AARCH64)" ]; then \
		$(call skip_or_fail,test-aarch64,the Rust target $(AARCH64) is not installed (rustup target add $(AARCH64))); \
	elif ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then \
		$(call skip_or_fail,test-aarch64,qemu-aarch64 or aarch64-linux-gnu-gcc missing (.ci/apt-packages)); \
	else \
		$(AARCH64_TEST) -- --skip open_failures_are_errors_with_a_fix_hint \
			--skip wipe_on_fork_word_reads_zero_in_a_child \
			--skip a_child_made_without_fork_handlers_gets_another_token \
			--skip records_of_a_wiped_registry_read_as_free_in_a_child \
			--skip a_child_process_is_refused_and_sees_no_handle && \
		$(COPY_TEST_ENV) $(AARCH64_TEST) --release -- --ignored \
			full_sweep_wc_neon_; \
	fi
TEST_TARGETS += test-aarch64
