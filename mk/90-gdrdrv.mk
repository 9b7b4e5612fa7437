# The real gdrdrv kernel module in a QEMU VM, on the project's fake NVIDIA P2P provider
# (vm/, described in vm/README.md).
#
# make test-gdrdrv GDRDRV_SRC=<gdrcopy checkout>
#   Builds the provider (vm/nvp2p) and the checkout's gdrdrv with kbuild against Debian's
#   linux-headers-amd64, packs an initramfs (busybox-static, the modules, the C ABI suites, the
#   stress program, the tools, the emulator in GDRSIM_BACKING=kernel mode and the libraries
#   they need), and boots linux-image-amd64 in qemu-system-x86_64 once per module mode
#   (GDRVM_MODES, default: persistent nonpersistent). Kernel, headers, QEMU and busybox are
#   unpacked from Debian's packages into $(BUILD_DIR)/gdrdrv-vm (apt-get download + dpkg -x).
#   Without GDRDRV_SRC it says how to get a checkout and passes. Nothing is fetched from the
#   network but Debian packages; nothing built from the checkout leaves the build directory.
# UPSTREAM_TESTS=<dir> UPSTREAM_LIB_DIR=<dir>
#   Adds NVIDIA's gdrcopy_sanity, copybw, copylat and apiperf (from UPSTREAM_TESTS), run once
#   against NVIDIA's libgdrapi.so.2 (from UPSTREAM_LIB_DIR) and once against this project's,
#   with both tallies side by side.
# When make test-ucx has built UCX (build/ucx/inst), the VM runs UCX too, with its default
#   settings on the real module: ucx_info -d, ucx_perftest over gdr_copy and uct_gdr_check.

GDRDRV_SRC ?=
UPSTREAM_TESTS ?=
UPSTREAM_LIB_DIR ?=
GDRVM_DIR := $(BUILD_DIR)/gdrdrv-vm
GDRVM_MODES ?= persistent nonpersistent
GDRVM_KMAKE = $(MAKE) --no-print-directory -C $(GDRVM_DIR)/root/usr/src/linux-headers-$$(cat $(GDRVM_DIR)/kver)

test-gdrdrv:
ifeq ($(strip $(GDRDRV_SRC)),)
	@echo "test-gdrdrv: skipped: no gdrdrv source. Give a gdrcopy 2.6 checkout, e.g."
	@echo "  git clone -b v2.6 https://github.com/NVIDIA/gdrcopy && make test-gdrdrv GDRDRV_SRC=\$$PWD/gdrcopy"
	@echo "  (UPSTREAM_TESTS=<its build dir with gdrcopy_sanity> UPSTREAM_LIB_DIR=<its libgdrapi.so.2 dir> add NVIDIA's tests)"
else
	@test -f "$(GDRDRV_SRC)/src/gdrdrv/gdrdrv.c" || { echo "GDRDRV_SRC=$(GDRDRV_SRC) has no src/gdrdrv/gdrdrv.c"; exit 1; }
	@$(MAKE) --no-print-directory gdrdrv-vm-image
	@fail=0; for m in $(GDRVM_MODES); do \
		echo "== gdrdrv VM: $$m mode"; \
		vm/run.sh $$m $(GDRVM_DIR) > $(GDRVM_DIR)/result-$$m.txt; rc=$$?; \
		grep -vE '^gdrvm-(result|case|trace):' $(GDRVM_DIR)/result-$$m.txt; \
		[ $$rc -eq 0 ] || fail=1; \
	done; \
	vm/report.sh $(GDRVM_DIR) $(GDRVM_MODES) || fail=1; \
	UPSTREAM_TESTS=$(UPSTREAM_TESTS) vm/diff-emulator.sh $(GDRVM_DIR) $(ABI_OUT) $(REL_OUT) $(LIB_DIR) \
		$(SIM_DIR) $(GDRVM_MODES) || fail=1; \
	exit $$fail
endif

# Everything the VM boots: kernel, modules, initramfs.
gdrdrv-vm-image: lib sim tools $(ABI_OUT)/api $(ABI_OUT)/handles $(ABI_OUT)/threads $(ABI_OUT)/fork \
		$(REL_OUT)/stress $(REL_OUT)/forkhold
	@mkdir -p $(GDRVM_DIR)
	vm/fetch.sh $(GDRVM_DIR) > $(GDRVM_DIR)/kver
	cp $(GDRVM_DIR)/root/boot/vmlinuz-$$(cat $(GDRVM_DIR)/kver) $(GDRVM_DIR)/vmlinuz
	rm -rf $(GDRVM_DIR)/nvp2p $(GDRVM_DIR)/gdrdrv && mkdir -p $(GDRVM_DIR)/gdrdrv
	cp -r vm/nvp2p $(GDRVM_DIR)/nvp2p
	$(GDRVM_KMAKE) M=$(GDRVM_DIR)/nvp2p modules
	cp $(GDRDRV_SRC)/src/gdrdrv/gdrdrv.c $(GDRDRV_SRC)/src/gdrdrv/gdrdrv.h $(GDRVM_DIR)/gdrdrv/
	cp vm/gdrdrv.Kbuild $(GDRVM_DIR)/gdrdrv/Kbuild
	hdr=$$(ls -d $(GDRVM_DIR)/root/usr/src/linux-headers-*-common | head -1); flags=; \
	grep -q 'struct proc_ops' $$hdr/include/linux/proc_fs.h && flags="$$flags -DGDRDRV_HAVE_PROC_OPS"; \
	grep -q 'vm_flags_set' $$hdr/include/linux/mm.h && flags="$$flags -DGDRDRV_HAVE_VM_FLAGS_SET"; \
	$(GDRVM_KMAKE) M=$(GDRVM_DIR)/gdrdrv NVIDIA_SRC_DIR=$(GDRVM_DIR)/nvp2p \
		GDRDRV_HAVE_FLAGS="$$flags" KBUILD_EXTRA_SYMBOLS=$(GDRVM_DIR)/nvp2p/Module.symvers modules
	rm -rf $(GDRVM_DIR)/stage && mkdir -p $(GDRVM_DIR)/stage/mods $(GDRVM_DIR)/stage/t/lib \
		$(GDRVM_DIR)/stage/t/sim $(GDRVM_DIR)/stage/t/abi $(GDRVM_DIR)/stage/t/bin
	cp $(GDRVM_DIR)/nvp2p/nvp2p.ko $(GDRVM_DIR)/gdrdrv/gdrdrv.ko $(GDRVM_DIR)/stage/mods/
	cp -a $(LIB_DIR)/libgdrapi.so* $(GDRVM_DIR)/stage/t/lib/
	cp -a $(SIM_DIR)/libcuda.so* $(SIM_DIR)/libcudart.so* $(SIM_DIR)/libnvidia-ml.so* $(GDRVM_DIR)/stage/t/sim/
	cp $(ABI_OUT)/api $(ABI_OUT)/handles $(ABI_OUT)/threads $(ABI_OUT)/fork \
		$(REL_OUT)/stress $(REL_OUT)/forkhold $(GDRVM_DIR)/stage/t/abi/
	cp $(addprefix $(BIN_DIR)/,$(TOOLS_BINS)) $(GDRVM_DIR)/stage/t/bin/
	cp vm/tests.sh $(GDRVM_DIR)/stage/t/tests.sh
	@if [ -x $(UCX_DIR)/inst/bin/ucx_info ]; then \
		echo "gdrdrv VM: with UCX from $(UCX_DIR)/inst"; \
		mkdir -p $(GDRVM_DIR)/stage/t/ucx && \
		cp -a $(UCX_DIR)/inst/bin $(UCX_DIR)/inst/lib $(GDRVM_DIR)/stage/t/ucx/ && \
		rm -rf $(GDRVM_DIR)/stage/t/ucx/lib/pkgconfig && \
		find $(GDRVM_DIR)/stage/t/ucx/lib -name '*.la' -delete && \
		$(CC) -O1 -g -Wall -Werror -I$(UCX_DIR)/inst/include -I$(UCX_DIR)/cuda/include -Iharness \
			ucx/uct_gdr_check.c -o $(GDRVM_DIR)/stage/t/ucx/bin/uct_gdr_check \
			-L$(UCX_DIR)/inst/lib -L$(SIM_DIR) -luct -lucs -lcuda && \
		$(CC) -O1 -g -Wall -Werror -shared -fPIC -Iinclude harness/gdr_count.c \
			-o $(GDRVM_DIR)/stage/t/ucx/lib/gdr_count.so -ldl || exit 1; \
	else echo "gdrdrv VM: without UCX (make test-ucx builds it)"; fi
ifneq ($(strip $(UPSTREAM_TESTS)),)
	@test -x "$(UPSTREAM_TESTS)/gdrcopy_sanity" || { echo "UPSTREAM_TESTS=$(UPSTREAM_TESTS) has no gdrcopy_sanity"; exit 1; }
	@test -e "$(UPSTREAM_LIB_DIR)/libgdrapi.so.2" || { echo "UPSTREAM_LIB_DIR=$(UPSTREAM_LIB_DIR) has no libgdrapi.so.2"; exit 1; }
	mkdir -p $(GDRVM_DIR)/stage/t/upstream/bin $(GDRVM_DIR)/stage/t/upstream/lib
	cp $(addprefix $(UPSTREAM_TESTS)/,gdrcopy_sanity gdrcopy_copybw gdrcopy_copylat gdrcopy_apiperf) \
		$(GDRVM_DIR)/stage/t/upstream/bin/
	cp -a $(UPSTREAM_LIB_DIR)/libgdrapi.so* $(GDRVM_DIR)/stage/t/upstream/lib/
endif
	vm/mkinitramfs.sh $(GDRVM_DIR)/stage $(GDRVM_DIR)/root/bin/busybox $(GDRVM_DIR)/initramfs.cpio.gz

TEST_TARGETS += test-gdrdrv
.PHONY: test-gdrdrv gdrdrv-vm-image
