# make install / uninstall.

install: lib
	install -D -m 755 $(LIB_DIR)/$(LIB_REAL) $(DESTDIR)$(libdir)/$(LIB_REAL)
	ln -sfn $(LIB_REAL) $(DESTDIR)$(libdir)/$(LIB_SONAME)
	ln -sfn $(LIB_SONAME) $(DESTDIR)$(libdir)/libgdrapi.so
	install -D -m 644 include/gdrapi.h $(DESTDIR)$(includedir)/gdrapi.h
	install -D -m 644 include/gdrconfig.h $(DESTDIR)$(includedir)/gdrconfig.h
