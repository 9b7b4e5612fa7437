# make rpm: RPM packages gdrcopy (the library), gdrcopy-devel and gdrcopy-tools under
#   $(BUILD_DIR)/rpm/, from rpm/gdrapi-rs.spec (which says why those names) with rpmbuild
#   (Debian's rpm package on Debian), then checked with rpmlint (rpm/rpmlint.toml justifies each
#   warning it filters). The source tarball is made from the files git knows plus untracked
#   ones it does not ignore; crates are fetched first and the package build runs offline.
# make test-rpm: builds them and runs rpm/test-rpm.sh (which says what it checks): install
#   into a scratch root with `rpm --root`, the file lists against the .deb files', use, removal.

RPM_DIR := $(BUILD_DIR)/rpm
RPM_TOPDIR := $(RPM_DIR)/rpmbuild
RPM_TARBALL := $(RPM_TOPDIR)/SOURCES/gdrapi-rs-$(PKG_VERSION).tar.gz
# The package build's own cargo target directory, kept between runs inside the usual one.
RPM_CARGO_TARGET_DIR := $(CARGO_TARGET_DIR)/rpm
# The glibc the RPMs are built against (with cargo-zigbuild, as the wheels): 2.17, so that
# they install on RHEL 8 (glibc 2.28) and later, and SUSE 15.
RPM_GLIBC ?= $(WHEEL_GLIBC)
RPMBUILD ?= rpmbuild
RPMLINT ?= rpmlint

.PHONY: rpm test-rpm
rpm:
	@command -v $(RPMBUILD) >/dev/null || { echo "make rpm: needs rpmbuild (Debian: rpm)"; exit 1; }
	@[ -z "$(RPM_GLIBC)" ] || command -v cargo-zigbuild >/dev/null || \
	    { echo "make rpm: needs cargo-zigbuild and ziglang (pip install -r .ci/requirements.txt)"; exit 1; }
	@spec=$$(sed -n 's/^Version: *//p' rpm/gdrapi-rs.spec); [ "$$spec" = "$(PKG_VERSION)" ] || \
	    { echo "make rpm: rpm/gdrapi-rs.spec has Version $$spec, Cargo.toml $(PKG_VERSION)"; exit 1; }
	$(CARGO) fetch --locked --target "$$(rustc -vV | sed -n 's/^host: //p')"
	rm -rf $(RPM_DIR)
	mkdir -p $(dir $(RPM_TARBALL))
	git -C $(CURDIR) ls-files -z --cached --others --exclude-standard \
	    | while IFS= read -r -d '' f; do [ -e "$$f" ] && printf '%s\0' "$$f"; done \
	    | tar -C $(CURDIR) --null -T - --transform 's,^,gdrapi-rs-$(PKG_VERSION)/,' -czf $(RPM_TARBALL)
	env $(addprefix -u ,$(DEB_ENV_UNSET)) $(RPMBUILD) -bb --nodeps \
	    --define '_topdir $(RPM_TOPDIR)' --define 'cargo_target_dir $(RPM_CARGO_TARGET_DIR)' \
	    $(if $(RPM_GLIBC),--define 'zig_glibc $(RPM_GLIBC)') \
	    rpm/gdrapi-rs.spec
	mv $(RPM_TOPDIR)/RPMS/*/*.rpm $(RPM_DIR)/
	@ls -l $(RPM_DIR)/*.rpm
	@if command -v $(RPMLINT) >/dev/null; then \
	    echo "$(RPMLINT) -s -c rpm/rpmlint.toml rpm/gdrapi-rs.spec $(RPM_DIR)/*.rpm"; \
	    $(RPMLINT) -s -c rpm/rpmlint.toml rpm/gdrapi-rs.spec $(RPM_DIR)/*.rpm; \
	else \
	    $(call skip_or_fail,make rpm,rpmlint is not installed; packages not checked); \
	fi

# Without its tools it says so and passes, except with CI set (skip_or_fail, Makefile).
RPM_TOOLS_MISSING = $(strip $(foreach t,$(RPMBUILD) $(RPMLINT) cargo-zigbuild dpkg-deb,\
	$(if $(shell command -v $(t) 2>/dev/null),,$(t))))

test-rpm:
	@if [ -n "$(RPM_TOOLS_MISSING)" ]; then \
	    $(call skip_or_fail,test-rpm,missing $(RPM_TOOLS_MISSING) (.ci/apt-packages$(,) .ci/requirements.txt)); \
	else \
	    $(MAKE) --no-print-directory rpm sim && \
	    BUILD_DIR=$(BUILD_DIR) RPM_DIR=$(RPM_DIR) SIM_DIR=$(SIM_DIR) PKG_VERSION=$(PKG_VERSION) \
	        MAKE="$(MAKE)" rpm/test-rpm.sh; \
	fi
TEST_TARGETS += test-rpm
