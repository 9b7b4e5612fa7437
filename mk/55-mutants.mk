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
