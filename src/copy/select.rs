//! Choosing the write-combining kernels: what the CPU offers, what `GDRAPI_COPY_IMPL` asks
//! for, and the process-wide dispatch table that holds the answer.
//!
//! The table is two atomic function pointers. They start out pointing at resolvers that make
//! the choice on first use, store the chosen functions and forward the call; every later call
//! is one atomic load and one indirect call, with no feature test and no lock.
//!
//! Where the CPU has `MOVDIR64B` and the choice is automatic, the store in the table is
//! [`store_timed`]: `MOVDIR64B` below [`TIMED_MIN`], and from there, per size class, the
//! automatic family's stores or `MOVDIR64B`, whichever the class's first copies find faster
//! on this host ([`super::trial`]).

use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::OnceLock;

use super::kernels::{self, Bulk};
use super::trial::TIMED_MIN;
#[cfg(target_arch = "x86_64")]
use super::trial::{self, Pick, Trials, Tsc};
use super::wc::{self, CopyFn, Isa};

/// A write-combining kernel family. [`Impl::name`] is its `GDRAPI_COPY_IMPL` spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Impl {
    /// 8-byte volatile accesses; runs everywhere.
    Portable,
    /// x86-64 SSE4.1: `MOVNTDQ` stores, `MOVNTDQA` streaming loads.
    Sse41,
    /// x86-64 AVX2: `VMOVNTDQ`/`VMOVNTDQA` on ymm.
    Avx2,
    /// x86-64 AVX-512F: `VMOVNTDQ`/`VMOVNTDQA` on zmm, one instruction per 64-byte line;
    /// loads below 1 KiB use AVX2 (see [`Impl::auto_load`]).
    Avx512,
    /// x86-64 `MOVDIR64B`: one 64-byte direct store per whole line, at every size; loads use
    /// the automatic choice. Forced, it is used for every store; the automatic choice times it
    /// against the widest family's stores, size class by size class.
    Movdir64b,
    /// aarch64 NEON: four q registers per line.
    Neon,
}

impl Impl {
    /// Every family this library knows, supported here or not.
    pub const ALL: [Impl; 6] = [
        Impl::Portable,
        Impl::Sse41,
        Impl::Avx2,
        Impl::Avx512,
        Impl::Movdir64b,
        Impl::Neon,
    ];

    /// The name of the family in upstream's "using ... implementation" log lines: upstream's
    /// own name where it has the same family (`SSE41`, `AVX2`, `MOVDIR64B`, `NEON`).
    pub fn log_name(self) -> &'static str {
        match self {
            Impl::Portable => "PORTABLE",
            Impl::Sse41 => "SSE41",
            Impl::Avx2 => "AVX2",
            Impl::Avx512 => "AVX512",
            Impl::Movdir64b => "MOVDIR64B",
            Impl::Neon => "NEON",
        }
    }

    /// The lower-case name used by `GDRAPI_COPY_IMPL`.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Portable => "portable",
            Impl::Sse41 => "sse41",
            Impl::Avx2 => "avx2",
            Impl::Avx512 => "avx512",
            Impl::Movdir64b => "movdir64b",
            Impl::Neon => "neon",
        }
    }

    /// Parses a name as [`Impl::name`] writes it (case-insensitive, surrounding blanks ignored).
    pub fn from_name(s: &str) -> Option<Impl> {
        let s = s.trim();
        Impl::ALL
            .into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(s))
    }

    /// True when this CPU (and this build's target) can run the family.
    pub fn is_supported(self) -> bool {
        match self {
            Impl::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Impl::Sse41 => std::arch::is_x86_feature_detected!("sse4.1"),
            #[cfg(target_arch = "x86_64")]
            Impl::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Impl::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Impl::Movdir64b => {
                std::arch::is_x86_feature_detected!("avx2") && kernels::x86::has_movdir64b()
            }
            #[cfg(target_arch = "aarch64")]
            Impl::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The supported families, in [`Impl::ALL`] order.
    pub fn supported() -> Vec<Impl> {
        Impl::ALL.into_iter().filter(|i| i.is_supported()).collect()
    }

    /// The default family for stores to write-combining memory on this CPU: the widest
    /// vectors. Where the CPU also has `MOVDIR64B`, stores below `TIMED_MIN` use that
    /// instead, and larger ones are timed against it ([`Kernels::timed_against`]).
    pub fn auto_store() -> Impl {
        first_supported(&[Impl::Avx512, Impl::Avx2, Impl::Sse41, Impl::Neon])
    }

    /// The default choice for streaming loads from write-combining memory on this CPU: the
    /// AVX-512 family where present (`VMOVNTDQA zmm` from 1 KiB on, AVX2 below: see
    /// [`load_avx512_split`](super::kernels::x86::load_avx512_split)), else AVX2, SSE4.1,
    /// NEON.
    pub fn auto_load() -> Impl {
        first_supported(&[Impl::Avx512, Impl::Avx2, Impl::Sse41, Impl::Neon])
    }

    /// The two complete copies of this family, or `None` when the CPU cannot run it.
    pub fn kernels(self) -> Option<Kernels> {
        if !self.is_supported() {
            return None;
        }
        let (store, load): (CopyFn, CopyFn) = match self {
            Impl::Portable => (wc::store::<Portable>, wc::load::<Portable>),
            #[cfg(target_arch = "x86_64")]
            Impl::Sse41 => (wc::store::<Sse41>, wc::load::<Sse41>),
            #[cfg(target_arch = "x86_64")]
            Impl::Avx2 => (wc::store::<Avx2>, wc::load::<Avx2>),
            #[cfg(target_arch = "x86_64")]
            Impl::Avx512 => (wc::store::<Avx512>, wc::load::<Avx512>),
            #[cfg(target_arch = "x86_64")]
            Impl::Movdir64b => {
                let load = match Impl::auto_load().kernels() {
                    Some(k) => k.load,
                    None => wc::load::<Portable> as CopyFn,
                };
                (wc::store::<Movdir64b> as CopyFn, load)
            }
            #[cfg(target_arch = "aarch64")]
            Impl::Neon => (wc::store::<Neon>, wc::load::<Neon>),
            #[allow(unreachable_patterns)]
            _ => return None,
        };
        Some(Kernels {
            store_impl: self,
            timed_against: None,
            load_impl: self.load_partner(),
            store,
            load,
        })
    }

    /// The kernels of this family with its stores timed against `MOVDIR64B` per size class
    /// ([`store_timed`]), where the CPU has both and the family is AVX-512 or AVX2.
    #[cfg(target_arch = "x86_64")]
    fn kernels_timed(self) -> Option<Kernels> {
        if !Impl::Movdir64b.is_supported() {
            return None;
        }
        let timed: CopyFn = match self {
            Impl::Avx512 => store_timed::<Avx512, Movdir64b>,
            Impl::Avx2 => store_timed::<Avx2, Movdir64b>,
            _ => return None,
        };
        let mut k = self.kernels()?;
        k.store = timed;
        k.timed_against = Some(Impl::Movdir64b);
        Some(k)
    }

    /// No family is timed against another off x86-64.
    #[cfg(not(target_arch = "x86_64"))]
    fn kernels_timed(self) -> Option<Kernels> {
        None
    }

    /// True when loads of this family may take the inline path of VEX streaming loads
    /// ([`wc::load_streaming`]): the AVX2 and AVX-512 families, whose kernels use those same
    /// instructions for 16-byte units. Forced `sse41` and `portable` keep their own accesses.
    pub fn inline_loads(self) -> bool {
        matches!(self, Impl::Avx2 | Impl::Avx512)
    }

    /// Which family's loads this family uses (itself, except store-only `movdir64b`).
    fn load_partner(self) -> Impl {
        match self {
            Impl::Movdir64b => Impl::auto_load(),
            other => other,
        }
    }
}

fn first_supported(order: &[Impl]) -> Impl {
    order
        .iter()
        .copied()
        .find(|i| i.is_supported())
        .unwrap_or(Impl::Portable)
}

/// A chosen pair of complete write-combining copies.
#[derive(Clone, Copy)]
pub struct Kernels {
    /// Family of the device-bound copy.
    pub store_impl: Impl,
    /// The family that `store_impl`'s stores are timed against, size class by size class
    /// from `TIMED_MIN`, each class keeping the faster; smaller stores use this family (the
    /// automatic choice on a CPU with `MOVDIR64B`).
    pub timed_against: Option<Impl>,
    /// Family of the host-bound copy.
    pub load_impl: Impl,
    pub(crate) store: CopyFn,
    pub(crate) load: CopyFn,
}

impl Kernels {
    /// True when this pair's stores below `TIMED_MIN` are `MOVDIR64B` (forced, or timed
    /// against it), so that stores above [`wc::SMALL`] up to [`wc::DIRECT_MAX`] bytes may take
    /// the inline path of the same accesses ([`wc::store_direct`]).
    pub fn inline_direct_stores(&self) -> bool {
        self.store_impl == Impl::Movdir64b || self.timed_against == Some(Impl::Movdir64b)
    }

    /// The stores' families as benchmarks print them: `avx512`, or
    /// `movdir64b, avx512|movdir64b (timed) from 8 KiB` where stores are timed (from
    /// `TIMED_MIN`).
    pub fn store_names(&self) -> String {
        match self.timed_against {
            None => self.store_impl.name().to_owned(),
            Some(other) => format!(
                "{other}, {}|{other} (timed) from {} KiB",
                self.store_impl.name(),
                TIMED_MIN >> 10,
                other = other.name(),
            ),
        }
    }
}

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels")
            .field("store_impl", &self.store_impl)
            .field("timed_against", &self.timed_against)
            .field("load_impl", &self.load_impl)
            .finish()
    }
}

struct Portable;
impl Isa for Portable {
    const STORE: Bulk = kernels::portable::store;
    const LOAD: Bulk = kernels::portable::load;
}

#[cfg(target_arch = "x86_64")]
struct Sse41;
#[cfg(target_arch = "x86_64")]
impl Isa for Sse41 {
    const STORE: Bulk = kernels::x86::store_sse41;
    const LOAD: Bulk = kernels::x86::load_sse41;
}

#[cfg(target_arch = "x86_64")]
struct Avx2;
#[cfg(target_arch = "x86_64")]
impl Isa for Avx2 {
    const STORE: Bulk = kernels::x86::store_avx2;
    const LOAD: Bulk = kernels::x86::load_avx2;
}

#[cfg(target_arch = "x86_64")]
struct Avx512;
#[cfg(target_arch = "x86_64")]
impl Isa for Avx512 {
    const STORE: Bulk = kernels::x86::store_avx512;
    const LOAD: Bulk = kernels::x86::load_avx512_split;
}

#[cfg(target_arch = "x86_64")]
struct Movdir64b;
#[cfg(target_arch = "x86_64")]
impl Isa for Movdir64b {
    const STORE: Bulk = kernels::x86::store_movdir64b;
    // Never used: `Impl::kernels` pairs it with the automatic streaming-load family.
    const LOAD: Bulk = kernels::x86::load_avx2;
}

/// The trials of the automatic family's stores against `MOVDIR64B`.
#[cfg(target_arch = "x86_64")]
static STORE_TRIALS: Trials = Trials::new();

/// The device-bound copy with `B`'s kernel (`MOVDIR64B`) below [`TIMED_MIN`] and, from there,
/// with family `A`'s or `B`'s per size class: while a class's trials run, by turns, each copy
/// timed; then the one [`STORE_TRIALS`] picked.
///
/// # Safety
/// As for [`wc::store`]; the CPU must support `A` and `B`.
#[cfg(target_arch = "x86_64")]
unsafe fn store_timed<A: Isa, B: Isa>(dev: *mut u8, host: *mut u8, n: usize) {
    // SAFETY: forwarded contract; both kernels run on this CPU, and whichever runs makes the
    // whole copy.
    unsafe {
        if n < TIMED_MIN {
            return wc::store::<B>(dev, host, n);
        }
        let c = trial::class(n);
        match STORE_TRIALS.decided(c) {
            Some(Pick::First) => wc::store::<A>(dev, host, n),
            Some(Pick::Second) => wc::store::<B>(dev, host, n),
            None => store_trial::<A, B>(c, dev, host, n),
        }
    }
}

/// One trial copy of [`store_timed`] in class `c`, out of the decided path's way.
///
/// # Safety
/// As for [`store_timed`].
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
unsafe fn store_trial<A: Isa, B: Isa>(c: usize, dev: *mut u8, host: *mut u8, n: usize) {
    // SAFETY: as in `store_timed`; each closure runs at most once, and exactly one runs.
    let first = || unsafe { wc::store::<A>(dev, host, n) };
    // SAFETY: as above.
    let second = || unsafe { wc::store::<B>(dev, host, n) };
    if let Some(d) = STORE_TRIALS.run(c, n, &Tsc, first, second) {
        log_decision(d);
    }
}

/// The DEBUG line of a size class's decision.
#[cfg(target_arch = "x86_64")]
#[cold]
fn log_decision(d: trial::Decision) {
    let k = chosen();
    let (first, last) = trial::class_range(d.class);
    let sizes = match last {
        Some(last) => format!("{first}-{last} bytes"),
        None => format!("{first} bytes and more"),
    };
    let names = [
        k.store_impl.log_name(),
        k.timed_against.map_or("?", Impl::log_name),
    ];
    let (kept, other) = match d.pick {
        Pick::First => (0, 1),
        Pick::Second => (1, 0),
    };
    gdr_dbg!(
        "stores of {sizes}: {} ({} ticks per 4 KiB at best, {} {}) after {} timed copies of each",
        names[kept],
        d.best[kept],
        names[other],
        d.best[other],
        trial::TRIALS
    );
}

#[cfg(target_arch = "aarch64")]
struct Neon;
#[cfg(target_arch = "aarch64")]
impl Isa for Neon {
    const STORE: Bulk = kernels::neon::store;
    const LOAD: Bulk = kernels::neon::load;
}

/// The name of the environment variable that forces a family.
pub const ENV: &str = "GDRAPI_COPY_IMPL";

/// What a `GDRAPI_COPY_IMPL` value leads to: the forced family's kernels, or the automatic
/// choice with the reason the request was refused.
fn choose(request: Option<&str>) -> (Kernels, Option<String>) {
    let auto = || {
        let store = Impl::auto_store();
        let mut k = store
            .kernels_timed()
            .or_else(|| store.kernels())
            .or_else(|| Impl::Portable.kernels());
        if let Some(k) = k.as_mut() {
            if let Some(l) = Impl::auto_load().kernels() {
                k.load = l.load;
                k.load_impl = l.load_impl;
            }
        }
        k
    };
    let portable = Kernels {
        store_impl: Impl::Portable,
        timed_against: None,
        load_impl: Impl::Portable,
        store: wc::store::<Portable>,
        load: wc::load::<Portable>,
    };
    let auto_k = auto().unwrap_or(portable);
    match request
        .map(str::trim)
        .filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case("auto"))
    {
        None => (auto_k, None),
        Some(name) => match Impl::from_name(name) {
            None => (auto_k, Some(format!("unknown {ENV} value \"{name}\""))),
            Some(i) => match i.kernels() {
                Some(k) => (k, None),
                None => (
                    auto_k,
                    Some(format!("{ENV}={} is not supported by this CPU", i.name())),
                ),
            },
        },
    }
}

/// Logs upstream's DEBUG line of CPU features, as upstream's `gdr_open` does on every call
/// (same names and order; `ls64` is always 0 here: no LS64 kernel is built).
pub fn log_cpu_flags() {
    if !crate::log::enabled(crate::log::Level::Debug) {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let f = kernels::x86::cpu_flags();
        gdr_dbg!(
            "vendor_intel={} movdir64b={} movdiri={} avx512={} avx2={} sse4_1={} avx={} sse={} sse2={}",
            u8::from(f.vendor_intel),
            u8::from(f.movdir64b),
            u8::from(f.movdiri),
            u8::from(std::arch::is_x86_feature_detected!("avx512f")),
            u8::from(std::arch::is_x86_feature_detected!("avx2")),
            u8::from(std::arch::is_x86_feature_detected!("sse4.1")),
            u8::from(std::arch::is_x86_feature_detected!("avx")),
            u8::from(std::arch::is_x86_feature_detected!("sse")),
            u8::from(std::arch::is_x86_feature_detected!("sse2"))
        );
    }
    #[cfg(target_arch = "aarch64")]
    gdr_dbg!(
        "ls64=0 neon={} sve={}",
        u8::from(std::arch::is_aarch64_feature_detected!("neon")),
        u8::from(std::arch::is_aarch64_feature_detected!("sve"))
    );
}

/// The process-wide choice, made once from the CPU and the environment.
pub fn chosen() -> &'static Kernels {
    static CHOSEN: OnceLock<Kernels> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let request = std::env::var(ENV).ok();
        let (k, refused) = choose(request.as_deref());
        if let Some(why) = refused {
            gdr_warn!(
                "{why}; falling back to {} (stores) / {} (loads); valid values: auto, {}",
                k.store_impl.name(),
                k.load_impl.name(),
                Impl::ALL.map(Impl::name).join(", ")
            );
        }
        match k.timed_against {
            None => gdr_dbg!(
                "using {} implementation of gdr_copy_to_mapping",
                k.store_impl.log_name()
            ),
            Some(other) => gdr_dbg!(
                "using {} implementation of gdr_copy_to_mapping below {} KiB, and from there \
                 {} or {}, per size class, whichever the first copies find faster",
                other.log_name(),
                TIMED_MIN >> 10,
                k.store_impl.log_name(),
                other.log_name()
            ),
        }
        gdr_dbg!(
            "using {} implementation of gdr_copy_from_mapping",
            k.load_impl.log_name()
        );
        k
    })
}

static STORE: AtomicPtr<()> = AtomicPtr::new(resolve_store as CopyFn as *mut ());
static LOAD: AtomicPtr<()> = AtomicPtr::new(resolve_load as CopyFn as *mut ());
/// Whether the chosen load family allows the table-free load path (`wc::load_streaming`);
/// false until installed.
static INLINE_LOADS: AtomicBool = AtomicBool::new(false);
/// Whether the chosen stores allow the table-free `MOVDIR64B` path (`wc::store_direct`);
/// false until installed.
static INLINE_DIRECT: AtomicBool = AtomicBool::new(false);
/// Whether [`install`] has run.
static INSTALLED: AtomicBool = AtomicBool::new(false);

fn install() -> &'static Kernels {
    let k = chosen();
    STORE.store(k.store as *mut (), Ordering::Release);
    LOAD.store(k.load as *mut (), Ordering::Release);
    INLINE_LOADS.store(k.load_impl.inline_loads(), Ordering::Release);
    INLINE_DIRECT.store(k.inline_direct_stores(), Ordering::Release);
    INSTALLED.store(true, Ordering::Release);
    k
}

/// Makes the process-wide choice now (at the first mapping) rather than at the first copy
/// that needs the table, so that the table-free load path applies from the first small read,
/// and runs the chosen load kernel once on host memory (see [`warm_load`]).
#[inline]
pub(crate) fn prepare() {
    if !INSTALLED.load(Ordering::Acquire) {
        let (_, load) = install_or_portable();
        warm_load(load);
    }
}

/// Runs `load` once over 1 KiB of host memory, so that the process's first read from a
/// mapping does not also pay for the kernel's cold code (its instructions, their TLB entry,
/// its branches): several hundred nanoseconds, once, moved into the first `gdr_map`.
#[cold]
#[inline(never)]
fn warm_load(load: CopyFn) {
    #[repr(align(64))]
    struct Buf([u8; 1024]);
    let src = Buf([0; 1024]);
    let mut dst = Buf([0; 1024]);
    // SAFETY: both buffers are 1 KiB of this frame's memory, readable and writable, and a
    // chosen kernel runs on this CPU; streaming loads from ordinary memory are ordinary loads.
    unsafe { load(src.0.as_ptr().cast_mut(), dst.0.as_mut_ptr(), src.0.len()) };
    std::hint::black_box(&mut dst);
}

/// True when the installed load family allows the table-free load path.
#[inline(always)]
pub(crate) fn inline_loads() -> bool {
    INLINE_LOADS.load(Ordering::Relaxed)
}

/// True when the installed stores allow the table-free `MOVDIR64B` path.
#[inline(always)]
pub(crate) fn inline_direct_stores() -> bool {
    INLINE_DIRECT.load(Ordering::Relaxed)
}

/// [`install`], for the resolvers: never panics. Should the choice panic (it reads the
/// environment, formats and logs), the copy uses the portable kernels and the next call
/// tries again; copies may then run outside the C entry points' panic boundary.
fn install_or_portable() -> (CopyFn, CopyFn) {
    std::panic::catch_unwind(install)
        .map(|k| (k.store, k.load))
        .unwrap_or((wc::store::<Portable>, wc::load::<Portable>))
}

/// First call through the table: choose, install, forward.
unsafe fn resolve_store(dev: *mut u8, host: *mut u8, n: usize) {
    // SAFETY: forwarded caller contract; the kernel is supported by construction.
    unsafe { (install_or_portable().0)(dev, host, n) }
}

/// First call through the table: choose, install, forward.
unsafe fn resolve_load(dev: *mut u8, host: *mut u8, n: usize) {
    // SAFETY: as in `resolve_store`.
    unsafe { (install_or_portable().1)(dev, host, n) }
}

/// The installed device-bound copy.
#[inline(always)]
pub(crate) fn store_fn() -> CopyFn {
    let p = STORE.load(Ordering::Acquire);
    // SAFETY: `STORE` only ever holds values cast from `CopyFn` (the initial resolver or a
    // chosen kernel), so casting back gives the same function pointer.
    unsafe { core::mem::transmute::<*mut (), CopyFn>(p) }
}

/// The installed host-bound copy.
#[inline(always)]
pub(crate) fn load_fn() -> CopyFn {
    let p = LOAD.load(Ordering::Acquire);
    // SAFETY: as in `store_fn`.
    unsafe { core::mem::transmute::<*mut (), CopyFn>(p) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_are_upstreams_for_the_families_it_has() {
        assert_eq!(Impl::Sse41.log_name(), "SSE41");
        assert_eq!(Impl::Avx2.log_name(), "AVX2");
        assert_eq!(Impl::Movdir64b.log_name(), "MOVDIR64B");
        assert_eq!(Impl::Neon.log_name(), "NEON");
    }

    #[test]
    fn names_round_trip() {
        for i in Impl::ALL {
            assert_eq!(Impl::from_name(i.name()), Some(i));
            assert_eq!(
                Impl::from_name(&format!(" {} ", i.name().to_uppercase())),
                Some(i)
            );
        }
        assert_eq!(Impl::from_name("sse2"), None);
    }

    #[test]
    fn portable_always_supported_and_auto_is_supported() {
        assert!(Impl::Portable.is_supported());
        assert!(Impl::auto_store().is_supported());
        assert!(Impl::auto_load().is_supported());
        assert!(Impl::supported().contains(&Impl::Portable));
    }

    #[test]
    fn stores_are_timed_against_movdir64b_where_the_cpu_has_it() {
        let (k, _) = choose(None);
        let timed = Impl::Movdir64b.is_supported()
            && matches!(Impl::auto_store(), Impl::Avx512 | Impl::Avx2);
        assert_eq!(k.timed_against, timed.then_some(Impl::Movdir64b));
        assert_eq!(k.store_names().contains("|movdir64b (timed)"), timed);
        for i in Impl::ALL {
            if let Some(k) = i.kernels() {
                assert_eq!(k.timed_against, None, "{i:?} forced");
            }
        }
    }

    /// The inline `MOVDIR64B` store path applies exactly where stores below `TIMED_MIN` are
    /// `MOVDIR64B`: the automatic choice when timed against it, and the forced family.
    #[test]
    fn inline_direct_stores_only_where_small_stores_are_movdir64b() {
        let (k, _) = choose(None);
        assert_eq!(
            k.inline_direct_stores(),
            k.timed_against == Some(Impl::Movdir64b)
        );
        for i in Impl::ALL {
            if let Some(k) = i.kernels() {
                assert_eq!(
                    k.inline_direct_stores(),
                    i == Impl::Movdir64b,
                    "{i:?} forced"
                );
            }
        }
    }

    /// `store_timed` with two kernels every x86-64 CPU here runs: every copy is whole and
    /// exact, below `TIMED_MIN` and in every size class, through the trials and after them;
    /// sizes below `TIMED_MIN` start no trial, and every class that made enough copies has
    /// decided.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn timed_stores_copy_exactly_through_trials_and_after() {
        if !Impl::Sse41.is_supported() {
            return;
        }
        let timed: Vec<usize> = (0..trial::CLASSES)
            .flat_map(|c| {
                let (first, last) = trial::class_range(c);
                let last = last.unwrap_or(first * 2);
                [first, first + 1, (first + last) / 2 + 3, last]
            })
            .collect();
        let untimed = [65, 1000, 4096 + 17, TIMED_MIN - 1];
        let max = timed.iter().copied().max().unwrap_or(0);
        let src: Vec<u8> = (0..max + 64).map(|i| (i * 131 + 7) as u8).collect();
        let mut dst = vec![0u8; max + 128];
        let rounds = 2 * trial::TRIALS as usize + 1;
        // The untimed sizes first: had they started trials, class 0 would have decided.
        for (sizes, trials) in [(&untimed[..], false), (&timed[..], true)] {
            for round in 0..rounds {
                for &n in sizes {
                    let (d_off, s_off) = (round % 48, round % 5);
                    dst.fill(0xa5);
                    // SAFETY: both ranges lie inside the vectors; SSE4.1 and the portable
                    // kernel run on this CPU.
                    unsafe {
                        store_timed::<Portable, Sse41>(
                            dst.as_mut_ptr().add(d_off),
                            src.as_ptr().add(s_off).cast_mut(),
                            n,
                        )
                    };
                    assert_eq!(dst[d_off..d_off + n], src[s_off..s_off + n], "{n} bytes");
                    assert!(dst[..d_off].iter().all(|&b| b == 0xa5), "{n} bytes");
                    assert!(dst[d_off + n..].iter().all(|&b| b == 0xa5), "{n} bytes");
                }
            }
            for c in 0..trial::CLASSES {
                assert_eq!(STORE_TRIALS.decided(c).is_some(), trials, "class {c}");
            }
        }
    }

    #[test]
    fn env_choice() {
        let (k, why) = choose(None);
        assert!(why.is_none());
        assert_eq!(k.store_impl, Impl::auto_store());
        assert_eq!(k.load_impl, Impl::auto_load());

        let (k, why) = choose(Some("portable"));
        assert!(why.is_none());
        assert_eq!(
            (k.store_impl, k.load_impl),
            (Impl::Portable, Impl::Portable)
        );

        let (k, why) = choose(Some("no-such-kernel"));
        assert!(why.is_some_and(|w| w.contains("unknown")));
        assert_eq!(k.store_impl, Impl::auto_store());

        for i in Impl::ALL {
            let (k, why) = choose(Some(i.name()));
            if i.is_supported() {
                assert!(why.is_none(), "{i:?}");
                assert_eq!(k.store_impl, i);
            } else {
                assert!(why.is_some_and(|w| w.contains("not supported")), "{i:?}");
                assert_eq!(k.store_impl, Impl::auto_store());
            }
        }
    }
}
