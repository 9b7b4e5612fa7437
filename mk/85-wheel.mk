# make wheel: manylinux wheels of the library and the tools, for x86_64 and aarch64, under
#   $(BUILD_DIR)/wheel/ (distribution gdrapi-rs, Python package gdrapi_rs: python/README.md).
#   Built with cargo-zigbuild against glibc $(WHEEL_GLIBC) (zig's C toolchain from the ziglang
#   wheel links against that glibc's symbol versions and takes the unwinder statically, as
#   build-aux/cc-static-unwind does for `make`), then assembled by python/build_wheel.py and
#   checked with auditwheel (.ci/requirements.txt: ziglang, cargo-zigbuild, auditwheel).
# make test-wheel: builds them and runs python/test-wheel.sh (which says what it checks): ELF
#   facts, auditwheel, pip install into a fresh venv, the Python package's answers, dlopen by
#   both names, the doctor from the installed console script on the emulator, the Python API's
#   pytest suite against the installed package on the emulator's three backends, pip uninstall
#   leaving nothing; the aarch64 wheel's library and doctor under qemu-user.

WHEEL_DIR := $(BUILD_DIR)/wheel
WHEEL_GLIBC ?= 2.17
WHEEL_ARCHES ?= x86_64 aarch64
# manylinux_2_17 is manylinux2014: both names go into the tag, for older pips.
WHEEL_PLAT = manylinux_$(subst .,_,$(WHEEL_GLIBC))_$(1)$(if $(filter 2.17,$(WHEEL_GLIBC)),.manylinux2014_$(1))
WHEEL_VERSION := $(PKG_VERSION)
# zig builds go to a target directory of their own (other linker, other glibc).
WHEEL_CARGO_TARGET_DIR := $(CARGO_TARGET_DIR)/zig
CARGO_ZIGBUILD ?= cargo-zigbuild
AUDITWHEEL ?= auditwheel

.PHONY: wheel test-wheel
wheel:
	@command -v $(CARGO_ZIGBUILD) >/dev/null && python3 -m ziglang version >/dev/null 2>&1 || \
	    { echo "make wheel: needs cargo-zigbuild and ziglang (pip install -r .ci/requirements.txt)"; exit 1; }
	@for a in $(WHEEL_ARCHES); do \
	    [ -d "$$(rustc --print sysroot)/lib/rustlib/$$a-unknown-linux-gnu" ] || \
	    { echo "make wheel: the Rust target $$a-unknown-linux-gnu is missing (rustup target add)"; exit 1; }; done
	CARGO_TARGET_DIR=$(WHEEL_CARGO_TARGET_DIR) $(CARGO) zigbuild --release --locked \
	    -p gdrapi -p gdrapi-ext -p gdrcopy-tools $(foreach a,$(WHEEL_ARCHES),--target $(a)-unknown-linux-gnu.$(WHEEL_GLIBC)) \
	    $(CARGO_FLAGS)
	rm -rf $(WHEEL_DIR)
	$(foreach a,$(WHEEL_ARCHES),python3 python/build_wheel.py --version $(WHEEL_VERSION) \
	    --plat $(call WHEEL_PLAT,$(a)) --lib $(WHEEL_CARGO_TARGET_DIR)/$(a)-unknown-linux-gnu/release/libgdrapi.so \
	    --ext-lib $(WHEEL_CARGO_TARGET_DIR)/$(a)-unknown-linux-gnu/release/libgdrapi_ext.so --ext-version $(EXT_VERSION) \
	    --bin-dir $(WHEEL_CARGO_TARGET_DIR)/$(a)-unknown-linux-gnu/release --include-dir include \
	    --pc-in pkgconfig/gdrapi.pc.in --license LICENSE --out-dir $(WHEEL_DIR) &&) true
	@set -e; for w in $(WHEEL_DIR)/*.whl; do echo "$(AUDITWHEEL) show $$w"; $(AUDITWHEEL) show "$$w"; done

# The emulator built for aarch64 (the usual cross toolchain of test-aarch64), for the aarch64
# wheel's tests under qemu-user.
SIM_AARCH64_DIR := $(BUILD_DIR)/sim-aarch64
.PHONY: sim-aarch64
sim-aarch64:
	$(AARCH64_ENV) $(CARGO) build --release --locked -p gdrsim --target $(AARCH64) $(CARGO_FLAGS)
	@mkdir -p $(SIM_AARCH64_DIR)
	install -m 755 $(CARGO_TARGET_DIR)/$(AARCH64)/release/libcuda.so $(SIM_AARCH64_DIR)/libcuda.so.1

# Without the tools it says so and passes, except with CI set (skip_or_fail, Makefile).
WHEEL_TOOLS_MISSING = $(strip $(foreach t,cargo-zigbuild $(AUDITWHEEL) qemu-aarch64 aarch64-linux-gnu-gcc unzip,\
	$(if $(shell command -v $(t) 2>/dev/null),,$(t))) \
	$(if $(shell python3 -m ziglang version 2>/dev/null),,ziglang) \
	$(if $(shell python3 -c 'import pytest; print(1)' 2>/dev/null),,pytest) \
	$(foreach a,$(WHEEL_ARCHES),$(if $(wildcard $(shell rustc --print sysroot)/lib/rustlib/$(a)-unknown-linux-gnu),,rust-target-$(a))))

test-wheel:
	@if [ -n "$(WHEEL_TOOLS_MISSING)" ]; then \
	    $(call skip_or_fail,test-wheel,missing $(WHEEL_TOOLS_MISSING) (.ci/requirements.txt$(,) .ci/apt-packages$(,) .ci/run)); \
	else \
	    $(MAKE) --no-print-directory wheel sim sim-aarch64 && \
	    WHEEL_DIR=$(WHEEL_DIR) SIM_DIR=$(SIM_DIR) SIM_AARCH64_DIR=$(SIM_AARCH64_DIR) \
	    WHEEL_VERSION=$(WHEEL_VERSION) CC="$(CC)" AUDITWHEEL=$(AUDITWHEEL) python/test-wheel.sh; \
	fi
TEST_TARGETS += test-wheel
