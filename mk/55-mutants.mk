# make test-mutants: the mutation check (abi-tests/mutants). A shim libgdrapi.so.2 breaks one
# exported function at a time (GDRAPI_MUTANT=function:kind) in front of the real library; for
# each mutant the C ABI suites (with their Vulkan configurations) and the DMA-BUF and Vulkan
# suites run against it, and every mutant must make at least one of them fail, except those
# abi-tests/mutants/unobservable.txt lists with a reason.
# Each mutant stops at the first suite that kills it (MUTANTS_FIRST_KILL=1, the default here);
# MUTANTS_FIRST_KILL=0 runs every suite on every mutant, for the full table of which suites kill
# what. MUTANTS="gdr_unmap:noop ..." runs some; MUTANTS_JOBS, MUTANTS_SUITES: see
# abi-tests/mutants/run.sh.
MUTANTS_FIRST_KILL ?= 1

MUT_SRC := abi-tests/mutants
MUT_OUT := $(BUILD_DIR)/mutants
MUT_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -O1 -g -Iinclude

# Named and linked like the library: programs linked with -lgdrapi and dlopen by either name
# reach it first through LD_LIBRARY_PATH. -z nodelete keeps it loaded after a dlclose, so a
# later dlopen by soname finds it again and not the real library it loaded.
$(MUT_OUT)/lib/libgdrapi.so.2: $(MUT_SRC)/mutant.c include/gdrapi.h
	@mkdir -p $(@D)
	$(CC) $(MUT_CFLAGS) -fPIC -shared -Wl,-soname,libgdrapi.so.2 -Wl,-z,nodelete $< -o $@ \
		-ldl -lpthread
	ln -sfn libgdrapi.so.2 $(@D)/libgdrapi.so

$(MUT_OUT)/mutants-list: $(MUT_SRC)/mutant.c include/gdrapi.h
	@mkdir -p $(@D)
	$(CC) $(MUT_CFLAGS) -DMUTANTS_LIST_MAIN $< -o $@

mutants: $(MUT_OUT)/lib/libgdrapi.so.2 $(MUT_OUT)/mutants-list

test-mutants: lib sim abi-programs $(DMABUF_OUT)/dmabuf_test $(DMABUF_OUT)/dmabuf-probe vulkan-programs \
		mutants
	MUTANTS_FIRST_KILL=$(MUTANTS_FIRST_KILL) SIM_VULKAN_VARS="$(SIM_VULKAN_VARS)" $(MUT_SRC)/run.sh \
		$(MUT_OUT)/work $(MUT_OUT)/lib $(LIB_DIR) $(SIM_DIR) $(ABI_OUT) $(DMABUF_OUT) $(VULKAN_OUT) \
		$(MUT_OUT)/mutants-list

TEST_TARGETS += test-mutants
.PHONY: test-mutants mutants

# make mutants-rust: the mutation check of the code that decides, from outside it. cargo-mutants
# (cargo install cargo-mutants) mutates the session (src/session/: the lookups, each call's
# decision, the holds on a handle, the copy's check, close's order) and the Vulkan import's table
# of pins and imports (Table:: in src/backend/vulkan.rs), one mutant at a time in a copy of the
# tree, and runs the session's and the table's unit tests against each; every mutant must fail
# them, except those abi-tests/mutants/rust-unobservable.txt lists with the reason. Left out, as
# what the C suites observe and unit tests in one process cannot: the fork handlers and gdr_close
# in a child (the fork suite), and gdr_open on a real backend (every suite). Each copy builds in its own
# target folder (not the Makefile's CARGO_TARGET_DIR). Not in `make test`: about
# 124 mutants, 5-11 minutes on two cores with its build; the tally of its last run heads
# abi-tests/mutants/rust-unobservable.txt.
MUTANTS_RUST_OUT ?= $(BUILD_DIR)/mutants-rust
MUTANTS_RUST_JOBS ?= 2
MUTANTS_RUST = env -u CARGO_TARGET_DIR cargo mutants -p gdrapi -f 'src/session/*.rs' -f src/backend/vulkan.rs \
	--re 'src/session/|Table::' --exclude-re 'fork|foreign|open_with|replace open |tests\.rs' -j $(MUTANTS_RUST_JOBS) \
	-o $(MUTANTS_RUST_OUT) -- --lib -- session:: backend::vulkan::
mutants-rust:
	@if ! command -v cargo-mutants >/dev/null; then \
		$(call skip_or_fail,mutants-rust,cargo-mutants (cargo install cargo-mutants)); exit 0; fi; \
	rm -rf $(MUTANTS_RUST_OUT); mkdir -p $(MUTANTS_RUST_OUT); \
	echo "$(MUTANTS_RUST)"; $(MUTANTS_RUST); rc=$$?; out=$(MUTANTS_RUST_OUT)/mutants.out; \
	test -f $$out/caught.txt || { echo "mutants-rust: cargo-mutants ran no mutant (exit $$rc)"; exit 1; }; \
	sed 's/#.*//;/^[[:space:]]*$$/d' $(MUT_SRC)/rust-unobservable.txt | sort > $(MUTANTS_RUST_OUT)/listed.txt; \
	sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /' $$out/missed.txt | sort > $(MUTANTS_RUST_OUT)/missed.txt; \
	stale=$$(comm -13 $(MUTANTS_RUST_OUT)/missed.txt $(MUTANTS_RUST_OUT)/listed.txt); \
	survivors=$$(comm -23 $(MUTANTS_RUST_OUT)/missed.txt $(MUTANTS_RUST_OUT)/listed.txt); \
	echo "mutants-rust: $$(cat $$out/caught.txt $$out/timeout.txt | grep -c .) killed (a hang is a failed test)," \
		"$$(comm -12 $(MUTANTS_RUST_OUT)/missed.txt $(MUTANTS_RUST_OUT)/listed.txt | grep -c .) unobservable (listed)," \
		"$$(echo "$$survivors" | grep -c .) survived, $$(grep -c . $$out/unviable.txt) unviable (do not build)"; \
	test -z "$$stale" || printf 'listed in rust-unobservable.txt but killed or not generated:\n%s\n' "$$stale"; \
	test -z "$$survivors" || printf 'survived:\n%s\n' "$$survivors"; \
	test -z "$$stale$$survivors"
.PHONY: mutants-rust
