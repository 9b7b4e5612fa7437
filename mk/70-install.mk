# make install / uninstall.
#
# install copies into $(DESTDIR) under prefix/libdir/includedir/bindir (upstream's names and
# defaults, see the Makefile):
#   $(libdir)/libgdrapi.so.2.6, libgdrapi.so.2 -> libgdrapi.so.2.6, libgdrapi.so -> libgdrapi.so.2
#   $(includedir)/gdrapi.h, gdrconfig.h
#   $(libdir)/pkgconfig/gdrapi.pc        (upstream has none; generated from pkgconfig/gdrapi.pc.in)
#   $(libdir)/libgdrapi_ext.so.0.1, libgdrapi_ext.so.0 -> libgdrapi_ext.so.0.1,
#   libgdrapi_ext.so -> libgdrapi_ext.so.0   (host-written memory, mk/37-ext.mk)
#   $(includedir)/gdrapi_ext.h, $(libdir)/pkgconfig/gdrapi_ext.pc   (its header and pkg-config file)
#   $(bindir)/gdrcopy_copybw, gdrcopy_copylat, gdrcopy_apiperf, gdrcopy   (those `make tools` built)
#   $(bindir)/copybw, copylat, apiperf   (upstream's compat names, links to the gdrcopy_* programs)
# uninstall removes exactly those files. It then removes the directories that install may have
# created, bottom-up and only while they are empty, never $(prefix) itself, and never anything
# when installing straight into a system prefix (/usr, /usr/local with no DESTDIR), whose
# directories belong to the system even when empty.

pkgconfigdir ?= $(libdir)/pkgconfig

# Programs `make tools` may leave in $(BIN_DIR), and upstream's compat names for three of them.
INSTALL_TOOLS := gdrcopy_copybw gdrcopy_copylat gdrcopy_apiperf gdrcopy
INSTALL_TOOL_LINKS := copybw:gdrcopy_copybw copylat:gdrcopy_copylat apiperf:gdrcopy_apiperf

PC_FILE := $(BUILD_DIR)/pkgconfig/gdrapi.pc
PC_EXT_FILE := $(BUILD_DIR)/pkgconfig/gdrapi_ext.pc

# pkg-config variables, written relative to ${prefix}/${exec_prefix} where they lie below them,
# so that the file stays correct if the tree is moved as a whole.
pc_rel = $(if $(filter $(2)/%,$(1)),$${$(3)}$(patsubst $(2)%,%,$(1)),$(1))
PC_EXEC_PREFIX := $(if $(filter $(prefix),$(exec_prefix)),$${prefix},$(call pc_rel,$(exec_prefix),$(prefix),prefix))
PC_LIBDIR := $(call pc_rel,$(libdir),$(exec_prefix),exec_prefix)
PC_INCLUDEDIR := $(call pc_rel,$(includedir),$(prefix),prefix)

.PHONY: $(PC_FILE) $(PC_EXT_FILE)
$(PC_FILE) $(PC_EXT_FILE): $(BUILD_DIR)/pkgconfig/%.pc: pkgconfig/%.pc.in
	@mkdir -p $(dir $@)
	sed -e 's|@prefix@|$(prefix)|g' -e 's|@exec_prefix@|$(PC_EXEC_PREFIX)|g' \
	    -e 's|@libdir@|$(PC_LIBDIR)|g' -e 's|@includedir@|$(PC_INCLUDEDIR)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' -e 's|@EXT_VERSION@|$(EXT_VERSION)|g' $< > $@.tmp
	mv $@.tmp $@

install: lib ext tools $(PC_FILE) $(PC_EXT_FILE)
	install -d $(DESTDIR)$(libdir) $(DESTDIR)$(includedir) $(DESTDIR)$(pkgconfigdir)
	install -m 755 $(LIB_DIR)/$(LIB_REAL) $(DESTDIR)$(libdir)/$(LIB_REAL)
	ln -sfn $(LIB_REAL) $(DESTDIR)$(libdir)/$(LIB_SONAME)
	ln -sfn $(LIB_SONAME) $(DESTDIR)$(libdir)/libgdrapi.so
	install -m 755 $(LIB_DIR)/$(EXT_REAL) $(DESTDIR)$(libdir)/$(EXT_REAL)
	ln -sfn $(EXT_REAL) $(DESTDIR)$(libdir)/$(EXT_SONAME)
	ln -sfn $(EXT_SONAME) $(DESTDIR)$(libdir)/libgdrapi_ext.so
	install -m 644 include/gdrapi.h include/gdrconfig.h include/gdrapi_ext.h $(DESTDIR)$(includedir)/
	install -m 644 $(PC_FILE) $(DESTDIR)$(pkgconfigdir)/gdrapi.pc
	install -m 644 $(PC_EXT_FILE) $(DESTDIR)$(pkgconfigdir)/gdrapi_ext.pc
	@set -e; for t in $(INSTALL_TOOLS); do \
	    if [ -f $(BIN_DIR)/$$t ]; then \
	        echo "install -D -m 755 $(BIN_DIR)/$$t $(DESTDIR)$(bindir)/$$t"; \
	        install -D -m 755 $(BIN_DIR)/$$t $(DESTDIR)$(bindir)/$$t; \
	    fi; \
	done; \
	for l in $(INSTALL_TOOL_LINKS); do \
	    if [ -f $(BIN_DIR)/$${l#*:} ]; then \
	        echo "ln -sfn $${l#*:} $(DESTDIR)$(bindir)/$${l%%:*}"; \
	        ln -sfn $${l#*:} $(DESTDIR)$(bindir)/$${l%%:*}; \
	    fi; \
	done

uninstall:
	rm -f $(DESTDIR)$(libdir)/$(LIB_REAL) $(DESTDIR)$(libdir)/$(LIB_SONAME) \
	      $(DESTDIR)$(libdir)/libgdrapi.so \
	      $(DESTDIR)$(libdir)/$(EXT_REAL) $(DESTDIR)$(libdir)/$(EXT_SONAME) \
	      $(DESTDIR)$(libdir)/libgdrapi_ext.so \
	      $(DESTDIR)$(includedir)/gdrapi.h $(DESTDIR)$(includedir)/gdrconfig.h \
	      $(DESTDIR)$(includedir)/gdrapi_ext.h \
	      $(DESTDIR)$(pkgconfigdir)/gdrapi.pc $(DESTDIR)$(pkgconfigdir)/gdrapi_ext.pc
	rm -f $(addprefix $(DESTDIR)$(bindir)/,$(INSTALL_TOOLS))
	@set -e; for l in $(INSTALL_TOOL_LINKS); do \
	    f=$(DESTDIR)$(bindir)/$${l%%:*}; \
	    if [ -L "$$f" ] && [ "$$(readlink "$$f")" = "$${l#*:}" ]; then echo "rm -f $$f"; rm -f "$$f"; fi; \
	done
	@set -e; top='$(DESTDIR)$(prefix)'; top=$${top%/}; \
	case '$(DESTDIR):$(prefix)' in \
	    :/usr|:/usr/|:/usr/local|:/usr/local/|:/) exit 0;; \
	esac; \
	for d in '$(DESTDIR)$(pkgconfigdir)' '$(DESTDIR)$(libdir)' '$(DESTDIR)$(includedir)' '$(DESTDIR)$(bindir)'; do \
	    d=$${d%/}; \
	    while case "$$d" in "$$top"/*) true;; *) false;; esac && [ -d "$$d" ] && [ -z "$$(ls -A "$$d")" ]; do \
	        echo "rmdir $$d"; rmdir "$$d"; d=$$(dirname "$$d"); \
	    done; \
	done
