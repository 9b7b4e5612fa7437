# make deb: Debian packages (libgdrapi2, libgdrapi-dev, gdrcopy-tools once the tools build)
# under $(BUILD_DIR)/deb/, built by dpkg-buildpackage and checked with lintian.
# make test-pkg: builds them, installs them with dpkg, uses them, purges them (needs root).
#
# The source tree is copied to $(DEB_DIR)/src/ first (the files git knows plus untracked ones
# it does not ignore), so that the packaging's outputs never land in the checkout and the
# .deb files are not written to the checkout's parent directory. Crates are fetched here,
# before the package build, which then runs offline (debian/rules).

DEB_DIR := $(BUILD_DIR)/deb
DEB_STAGE := $(DEB_DIR)/src/gdrapi-rs
# The package build has its own cargo target directory (other profile settings, and a tree
# of its own whose file times cargo compares), kept between runs inside the usual one.
DEB_CARGO_TARGET_DIR := $(CARGO_TARGET_DIR)/deb
# lintian's verdict: any error or warning that is not overridden in debian/ fails `make deb`.
LINTIAN ?= lintian
LINTIAN_FLAGS ?= --display-info --fail-on error,warning
# Variables of this make that must not leak into the package build's own make.
DEB_ENV_UNSET := MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES BUILD_DIR DESTDIR prefix exec_prefix \
	libdir bindir includedir datadir pkgconfigdir

.PHONY: deb deb-stage
deb: deb-stage
	cd $(DEB_STAGE) && env $(addprefix -u ,$(DEB_ENV_UNSET)) CARGO_TARGET_DIR=$(DEB_CARGO_TARGET_DIR) \
	    dpkg-buildpackage -us -uc -b
	mv $(DEB_DIR)/src/*.deb $(DEB_DIR)/src/*.changes $(DEB_DIR)/src/*.buildinfo $(DEB_DIR)/
	@ls -l $(DEB_DIR)/*.deb
	@if command -v $(LINTIAN) >/dev/null; then \
	    echo "$(LINTIAN) $(LINTIAN_FLAGS) $(DEB_DIR)/*.changes"; \
	    $(LINTIAN) $(LINTIAN_FLAGS) $(DEB_DIR)/*.changes; \
	else \
	    $(call skip_or_fail,make deb,lintian is not installed; packages not checked); \
	fi

deb-stage:
	command -v dpkg-buildpackage >/dev/null || { echo "make deb: needs dpkg-dev and debhelper"; exit 1; }
	$(CARGO) fetch --locked --target "$$(rustc -vV | sed -n 's/^host: //p')"
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_STAGE)
	@if git -C $(CURDIR) rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	    echo "copy the source tree (git ls-files) to $(DEB_STAGE)"; \
	    git -C $(CURDIR) ls-files -z --cached --others --exclude-standard \
	        | while IFS= read -r -d '' f; do [ -e "$$f" ] && printf '%s\0' "$$f"; done \
	        | tar -C $(CURDIR) --null -T - -cf - | tar -C $(DEB_STAGE) -xf -; \
	else \
	    echo "copy the source tree (no git) to $(DEB_STAGE)"; \
	    tar -C $(CURDIR) --exclude=./.git --exclude=./build --exclude=./target \
	        --exclude=./$(patsubst $(CURDIR)/%,%,$(BUILD_DIR)) -cf - . | tar -C $(DEB_STAGE) -xf -; \
	fi

# The install and package test (abi-tests/pkg/run-test.sh says what it checks).
test-pkg: lib sim
	BUILD_DIR=$(BUILD_DIR) LIB_DIR=$(LIB_DIR) SIM_DIR=$(SIM_DIR) CC="$(CC)" MAKE="$(MAKE)" \
	    abi-tests/pkg/run-test.sh
TEST_TARGETS += test-pkg
.PHONY: test-pkg
