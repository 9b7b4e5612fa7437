//! Correctness of every copy path against a reference copy, with guard pages around both
//! buffers and canary bytes around the destination, plus a log of device accesses that proves
//! natural alignment and exact coverage.
//!
//! The debug-build suite samples the (size, device offset, host offset) space; the full cross
//! product runs in release through `make test-copy` (`cargo test --release -- --ignored`).

use super::access::trace::{self, Access};
use super::*;

const PAGE: usize = 4096;
const CANARY: u8 = 0xA5;

/// An anonymous mapping with a `PROT_NONE` page before and after its usable part.
struct Guarded {
    map: *mut u8,
    map_len: usize,
    len: usize,
}

impl Guarded {
    fn new(min_len: usize) -> Guarded {
        let len = min_len.div_ceil(PAGE).max(1) * PAGE;
        let map_len = len + 2 * PAGE;
        let map = crate::sys::anonymous_pages(map_len).expect("anonymous pages");
        // SAFETY: both pages lie inside the mapping made above.
        unsafe {
            assert_eq!(libc::mprotect(map.cast(), PAGE, libc::PROT_NONE), 0);
            assert_eq!(
                libc::mprotect(map.add(PAGE + len).cast(), PAGE, libc::PROT_NONE),
                0
            );
        }
        Guarded { map, map_len, len }
    }

    fn start(&self) -> *mut u8 {
        self.map.wrapping_add(PAGE)
    }

    /// A read-only view of the usable part; the copies under test write it through raw
    /// pointers only while no such view is alive.
    fn bytes(&self) -> &[u8] {
        // SAFETY: the usable part is readable for `len` bytes and lives as long as `self`.
        unsafe { core::slice::from_raw_parts(self.start(), self.len) }
    }

    /// Sets bytes `range` of the usable part to `v`.
    fn fill(&self, range: core::ops::Range<usize>, v: u8) {
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: the range lies inside the usable part, which is writable; callers hold no
        // view from `bytes` across this call.
        unsafe { self.start().add(range.start).write_bytes(v, range.len()) };
    }

    /// Fills with a position-dependent pattern that never equals the canary.
    fn fill_pattern(&self, seed: u32) {
        let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        let pattern: Vec<u8> = (0..self.len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let v = (x >> 24) as u8;
                if v == CANARY {
                    !v
                } else {
                    v
                }
            })
            .collect();
        // SAFETY: the usable part is writable for `len` bytes; `pattern` is a separate
        // allocation of the same length.
        unsafe { core::ptr::copy_nonoverlapping(pattern.as_ptr(), self.start(), self.len) };
    }

    fn fill_canary(&self) {
        self.fill(0..self.len, CANARY);
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToDevice,
    FromDevice,
}

/// Where the two ranges sit in their regions.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// At `PAD + offset`, canary bytes on both sides.
    Offsets(usize, usize),
    /// Flush against the trailing guard page.
    End,
    /// Flush against the leading guard page.
    Start,
}

const PAD: usize = 64;

/// A source region (pattern) and a destination region (canary) for one test.
struct Bench {
    src: Guarded,
    dst: Guarded,
    canary: Vec<u8>,
}

impl Bench {
    fn new(max_n: usize, seed: u32) -> Bench {
        let len = max_n + 2 * PAD + 64;
        let (src, dst) = (Guarded::new(len), Guarded::new(len));
        src.fill_pattern(seed);
        dst.fill_canary();
        let canary = vec![CANARY; dst.len];
        Bench { src, dst, canary }
    }

    fn offsets(&self, place: Place, n: usize) -> (usize, usize) {
        match place {
            Place::Offsets(s, d) => (PAD + s, PAD + d),
            Place::End => (self.src.len - n, self.dst.len - n),
            Place::Start => (0, 0),
        }
    }

    /// Copies `n` bytes with `engine` on a `kind` mapping in direction `dir` (the device is
    /// the destination for `ToDevice`, the source otherwise); checks the destination range
    /// against the source, the whole rest of the destination region against the canary, then
    /// restores the canary.
    fn check(&self, engine: &Engine, kind: MappingType, dir: Direction, place: Place, n: usize) {
        let (so, d_o) = self.offsets(place, n);
        let (src, dst) = (
            self.src.start().wrapping_add(so),
            self.dst.start().wrapping_add(d_o),
        );
        // SAFETY: both ranges lie inside their regions (`Bench::new` sized them), and the
        // regions are distinct mappings.
        unsafe {
            match dir {
                Direction::ToDevice => engine.to_mapping(kind, dst, src, n),
                Direction::FromDevice => engine.from_mapping(kind, dst, src, n),
            }
        }
        self.verify(
            so,
            d_o,
            n,
            &format!("{kind:?} {dir:?} {:?}", engine.kernels()),
        );
    }

    /// Checks that the `n` bytes at destination offset `d_o` equal those at source offset `so`
    /// and that the rest of the destination region still holds the canary, then restores it;
    /// `what` names the copy in a failure.
    fn verify(&self, so: usize, d_o: usize, n: usize, what: &str) {
        let s = &self.src.bytes()[so..so + n];
        let d = self.dst.bytes();
        if d[d_o..d_o + n] != *s {
            let i = (0..n).find(|&i| d[d_o + i] != s[i]).unwrap_or(0);
            panic!("{what} n={n} src+{so} dst+{d_o}: first wrong byte at {i}");
        }
        let before_ok = d[..d_o] == self.canary[..d_o];
        let after_ok = d[d_o + n..] == self.canary[d_o + n..];
        assert!(
            before_ok && after_ok,
            "{what} n={n} src+{so} dst+{d_o}: wrote outside the range (before: {}, after: {})",
            !before_ok,
            !after_ok
        );
        self.dst.fill(d_o..d_o + n, CANARY);
    }
}

/// Every (engine, mapping type) pair worth testing: WC with each supported family; device and
/// caching once (they do not use the families).
fn cases() -> Vec<(Engine, MappingType)> {
    let mut v: Vec<(Engine, MappingType)> = Impl::supported()
        .into_iter()
        .filter_map(Engine::new)
        .map(|e| (e, MappingType::WriteCombining))
        .collect();
    let e = Engine::chosen();
    v.push((e, MappingType::Device));
    v.push((e, MappingType::Caching));
    v
}

const DIRS: [Direction; 2] = [Direction::ToDevice, Direction::FromDevice];

/// Sizes 0..=4160, each at a different (source, destination) offset pair, and flush against
/// both guards.
fn sweep_sizes(engine: Engine, kind: MappingType) {
    let b = Bench::new(4160, 7);
    for dir in DIRS {
        for n in 0..=4160usize {
            let so = (n * 7 + n / 64) % 64;
            b.check(&engine, kind, dir, Place::Offsets(so, n % 64), n);
            b.check(&engine, kind, dir, Place::End, n);
            b.check(&engine, kind, dir, Place::Start, n);
        }
    }
}

#[test]
fn every_size_sampled_offsets() {
    for (e, kind) in cases() {
        sweep_sizes(e, kind);
    }
}

/// Sizes around every boundary the paths care about, with the full 64 x 64 offset product.
#[test]
fn every_offset_pair_boundary_sizes() {
    const SIZES: [usize; 16] = [1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 257];
    let b = Bench::new(257, 11);
    for (e, kind) in cases() {
        for dir in DIRS {
            for n in SIZES {
                for so in 0..64 {
                    for d_o in 0..64 {
                        b.check(&e, kind, dir, Place::Offsets(so, d_o), n);
                    }
                }
            }
        }
    }
}

#[test]
fn large_sizes() {
    const SIZES: [usize; 4] = [(1 << 20) + 1, (1 << 20) + 63, (1 << 20) + 4097, 123_457];
    let b = Bench::new((1 << 20) + 4097, 13);
    for (e, kind) in cases() {
        for dir in DIRS {
            for n in SIZES {
                for (so, d_o) in [(0, 0), (1, 63), (17, 5), (48, 32)] {
                    b.check(&e, kind, dir, Place::Offsets(so, d_o), n);
                }
                b.check(&e, kind, dir, Place::End, n);
                b.check(&e, kind, dir, Place::Start, n);
            }
        }
    }
}

/// The process-wide entry points copy correctly through the dispatch table and install the
/// automatic choice (no `GDRAPI_COPY_IMPL` in the test environment).
#[test]
fn global_entry_points() {
    let b = Bench::new(5000, 17);
    for kind in [
        MappingType::WriteCombining,
        MappingType::Device,
        MappingType::Caching,
    ] {
        for n in [0, 1, 13, 64, 65, 100, 4099] {
            let src = b.src.start().wrapping_add(PAD + 3);
            let dst = b.dst.start().wrapping_add(PAD + 5);
            // SAFETY: both ranges inside their regions.
            unsafe { to_mapping(kind, dst, src, n) };
            assert_eq!(
                b.dst.bytes()[PAD + 5..PAD + 5 + n],
                b.src.bytes()[PAD + 3..PAD + 3 + n]
            );
            assert_eq!(b.dst.bytes()[PAD + 5 + n], CANARY);
            assert_eq!(b.dst.bytes()[PAD + 4], CANARY);
            b.dst.fill_canary();
            // SAFETY: as above.
            unsafe { from_mapping(kind, dst, src, n) };
            assert_eq!(
                b.dst.bytes()[PAD + 5..PAD + 5 + n],
                b.src.bytes()[PAD + 3..PAD + 3 + n]
            );
            assert_eq!(b.dst.bytes()[PAD + 5 + n], CANARY);
            b.dst.fill_canary();
        }
    }
    if std::env::var_os(ENV).is_none() {
        assert_eq!(chosen().store_impl, Impl::auto_store());
        assert_eq!(chosen().load_impl, Impl::auto_load());
    }
}

/// Checks that `log` tiles `[dev, dev + n)` exactly, in order, and that every scalar access
/// is naturally aligned and at most `max_scalar` bytes wide, and every bulk range starts
/// 16-aligned and covers a non-zero multiple of 16 bytes.
fn assert_accesses(log: &[Access], dev: usize, n: usize, max_scalar: usize, what: &str) {
    let mut at = dev;
    for a in log {
        assert_eq!(a.addr, at, "{what}: gap or overlap in {log:?}");
        if a.bulk {
            assert!(
                a.addr % 16 == 0 && a.len % 16 == 0 && a.len > 0,
                "{what}: bad bulk {a:?}"
            );
        } else {
            assert!(
                a.len.is_power_of_two() && a.len <= max_scalar,
                "{what}: width {a:?}"
            );
            assert_eq!(a.addr % a.len, 0, "{what}: misaligned {a:?}");
        }
        at += a.len;
    }
    assert_eq!(at, dev + n, "{what}: covered {} of {n} bytes", at - dev);
}

#[test]
fn device_path_accesses_are_naturally_aligned_and_at_most_8_bytes() {
    let b = Bench::new(400, 19);
    let e = Engine::chosen();
    for n in 0..=300usize {
        for off in 0..64 {
            for dir in DIRS {
                let (dev, host) = (
                    b.dst.start().wrapping_add(off),
                    b.src.start().wrapping_add(3),
                );
                let log = trace::capture(|| {
                    // SAFETY: both ranges inside their regions.
                    unsafe {
                        match dir {
                            Direction::ToDevice => e.to_mapping(MappingType::Device, dev, host, n),
                            Direction::FromDevice => {
                                e.from_mapping(MappingType::Device, host, dev, n)
                            }
                        }
                    }
                });
                assert!(log.iter().all(|a| !a.bulk));
                assert_accesses(
                    &log,
                    dev as usize,
                    n,
                    8,
                    &format!("DEVICE {dir:?} n={n} off={off}"),
                );
            }
        }
    }
}

#[test]
fn wc_path_accesses_are_naturally_aligned() {
    let b = Bench::new(1200, 23);
    for imp in Impl::supported() {
        let Some(e) = Engine::new(imp) else { continue };
        for n in (0..=300usize).chain([511, 512, 513, 767, 1000, 1022, 1023, 1024, 1025, 1100]) {
            for off in 0..64 {
                for dir in DIRS {
                    let (dev, host) = (
                        b.dst.start().wrapping_add(off),
                        b.src.start().wrapping_add(5),
                    );
                    let log = trace::capture(|| {
                        // SAFETY: both ranges inside their regions.
                        unsafe {
                            match dir {
                                Direction::ToDevice => {
                                    e.to_mapping(MappingType::WriteCombining, dev, host, n)
                                }
                                Direction::FromDevice => {
                                    e.from_mapping(MappingType::WriteCombining, host, dev, n)
                                }
                            }
                        }
                    });
                    // The inline small-store path uses aligned 16-byte stores, the inline
                    // load path (AVX2 and AVX-512 families) aligned 16- and 32-byte loads;
                    // everything else outside a bulk range is at most 8 bytes wide.
                    let inline_load =
                        e.kernels().load_impl.inline_loads() && (16..=wc::SMALL_LOAD).contains(&n);
                    let inline_direct = e.kernels().inline_direct_stores()
                        && (wc::SMALL + 1..=wc::DIRECT_MAX).contains(&n);
                    let max = match dir {
                        Direction::ToDevice if n <= wc::SMALL => 16,
                        Direction::ToDevice if inline_direct => 64,
                        Direction::FromDevice if inline_load => 32,
                        _ => 8,
                    };
                    let what = format!("WC {imp:?} {dir:?} n={n} off={off}");
                    assert_accesses(&log, dev as usize, n, max, &what);
                    if n < 16 {
                        assert!(log.iter().all(|a| a.len <= 8), "{what}: {log:?}");
                    }
                    if inline_direct && dir == Direction::ToDevice {
                        // No call: whole lines as single 64-byte stores, the rest as in `copy`.
                        assert!(log.iter().all(|a| !a.bulk), "{what}: {log:?}");
                        let lines = log.iter().filter(|a| a.len == 64).count();
                        assert_eq!(lines, whole_lines(dev as usize, n), "{what}: {log:?}");
                    }
                    if inline_load && dir == Direction::FromDevice {
                        // No indirect call: the whole copy is individual accesses.
                        assert!(log.iter().all(|a| !a.bulk), "{what}: {log:?}");
                        // Whole 32-byte units wherever the length allows.
                        let wide = log.iter().filter(|a| a.len == 32).count();
                        let aligned32 = (dev as usize).next_multiple_of(32) - dev as usize;
                        let expect = n.saturating_sub(aligned32) / 32;
                        assert_eq!(wide, expect, "{what}: {log:?}");
                    }
                }
            }
        }
    }
}

/// How many whole 64-byte lines `[dev, dev + n)` holds.
fn whole_lines(dev: usize, n: usize) -> usize {
    ((dev + n) / 64).saturating_sub(dev.div_ceil(64))
}

/// The inline `MOVDIR64B` path's walk (`wc::store_lines`), with a line store that any CPU
/// runs in its place: every size it takes at every device offset copies exactly its range and
/// stores every whole line as one 64-byte access, the rest as the other paths do.
#[test]
fn direct_store_walk_copies_every_line_whole() {
    let b = Bench::new(wc::DIRECT_MAX, 31);
    for n in wc::SMALL + 1..=wc::DIRECT_MAX {
        for d_o in 0..64 {
            let so = (n * 5 + d_o) % 64;
            let (dev, host) = (
                b.dst.start().wrapping_add(PAD + d_o),
                b.src.start().wrapping_add(PAD + so),
            );
            let log = trace::capture(|| {
                // SAFETY: both ranges inside their regions; the line store copies the 64
                // bytes it is given, which `store_lines` keeps inside the range.
                unsafe {
                    wc::store_lines(dev, host, n, |d, s| {
                        assert_eq!(d as usize % 64, 0, "line at {d:?}");
                        trace::record(d, 64, false);
                        core::ptr::copy_nonoverlapping(s, d, 64);
                    })
                }
            });
            let what = format!("direct walk n={n} dev+{d_o} host+{so}");
            assert_accesses(&log, dev as usize, n, 64, &what);
            let lines = log.iter().filter(|a| a.len == 64).count();
            assert_eq!(lines, whole_lines(dev as usize, n), "{what}: {log:?}");
            b.verify(PAD + so, PAD + d_o, n, "direct walk");
        }
    }
}

/// The full product of `sizes` (within 0..=4160) and both offsets 0..63 for one family
/// (release only: `make test-copy`). `host_offsets` narrows the host side for paths whose
/// control flow does not depend on it (device, caching), to keep the run short.
fn full_sweep(
    e: Engine,
    kind: MappingType,
    host_offsets: &[usize],
    sizes: std::ops::RangeInclusive<usize>,
) {
    let b = Bench::new(4160, 29);
    for dir in DIRS {
        for n in sizes.clone() {
            for &ho in host_offsets {
                for d_o in 0..64 {
                    // The host is the source of a device-bound copy, the destination otherwise.
                    let so = if dir == Direction::ToDevice { ho } else { d_o };
                    let d_o = if dir == Direction::ToDevice { d_o } else { ho };
                    b.check(&e, kind, dir, Place::Offsets(so, d_o), n);
                }
            }
            b.check(&e, kind, dir, Place::End, n);
            b.check(&e, kind, dir, Place::Start, n);
        }
    }
}

const ALL_OFFSETS: [usize; 64] = {
    let mut a = [0; 64];
    let mut i = 0;
    while i < 64 {
        a[i] = i;
        i += 1;
    }
    a
};
const SOME_OFFSETS: [usize; 10] = [0, 1, 2, 3, 4, 7, 8, 15, 33, 63];

macro_rules! full_sweep_tests {
    ($($name:ident => $imp:expr, $kind:expr, $host:expr, $sizes:expr;)*) => {$(
        #[test]
        #[ignore = "full cross product; run in release with `make test-copy`"]
        fn $name() {
            match Engine::new($imp) {
                Some(e) => full_sweep(e, $kind, &$host, $sizes),
                None => eprintln!("{:?} not supported on this CPU: skipped", $imp),
            }
        }
    )*};
}

// NEON's sweep is split in two halves of about equal work (a check costs the region plus the
// size), so that under qemu-user (`make test-aarch64`) they run on two CPUs at once.
full_sweep_tests! {
    full_sweep_wc_portable => Impl::Portable, MappingType::WriteCombining, ALL_OFFSETS, 0..=4160;
    full_sweep_wc_sse41 => Impl::Sse41, MappingType::WriteCombining, ALL_OFFSETS, 0..=4160;
    full_sweep_wc_avx2 => Impl::Avx2, MappingType::WriteCombining, ALL_OFFSETS, 0..=4160;
    full_sweep_wc_avx512 => Impl::Avx512, MappingType::WriteCombining, ALL_OFFSETS, 0..=4160;
    full_sweep_wc_movdir64b => Impl::Movdir64b, MappingType::WriteCombining, ALL_OFFSETS, 0..=4160;
    full_sweep_wc_neon_small => Impl::Neon, MappingType::WriteCombining, ALL_OFFSETS, 0..=2400;
    full_sweep_wc_neon_large => Impl::Neon, MappingType::WriteCombining, ALL_OFFSETS, 2401..=4160;
    full_sweep_device => Impl::Portable, MappingType::Device, SOME_OFFSETS, 0..=4160;
    full_sweep_caching => Impl::Portable, MappingType::Caching, SOME_OFFSETS, 0..=4160;
}
