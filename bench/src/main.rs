//! `make bench`: copy throughput and latency table.
fn main() {}
