# make loc: the library's code lines (tools/loc.py: src/**/*.rs without blank lines, comments and
# tests), and its session's, the figures ARCHITECTURE.md's "The library, top to bottom" quotes.
loc:
	@python3 tools/loc.py .
.PHONY: loc
