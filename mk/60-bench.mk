# make bench: the copy-engine benchmark table.

bench:
	$(CARGO) run --release --locked -p gdrapi-bench
