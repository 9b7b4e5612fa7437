//! `GDRSIM_BACKING=vulkan`: the emulated GPU's memory is real VRAM seen through the PCIe BAR.
//!
//! One Vulkan allocation of the BAR memory type (the arena, `GDRSIM_VRAM_SIZE` bytes) is
//! sub-allocated by `cuMemAlloc`. With the real CUDA driver (found by path, see [`libcuda`];
//! the default), the arena's opaque fd is imported into CUDA, device pointers are CUDA device
//! addresses inside that import, and every CUDA function but the few that concern arena
//! allocations is forwarded to the real driver. With `GDRSIM_REAL_LIBCUDA=none`, device
//! pointers are the arena's CPU addresses and the emulator's own CUDA functions run on them
//! (for machines without CUDA: Mesa's lavapipe then stands in for the GPU).
//!
//! The emulated `/dev/gdrdrv` is unchanged except for its mappings: an mmap of a pin imports a
//! fresh fd of the arena into Vulkan and maps just the pin's range ([`arena`]); munmap frees
//! that import. A zapped mapping is replaced in place as in the host backing.
//!
//! The emulator calls into Vulkan and CUDA with its state locked; those drivers call
//! `munmap` and friends themselves, which the emulator interposes. [`with_driver`] marks such
//! calls so that the interposed functions pass them straight to the C library.

pub mod arena;
pub mod libcuda;

use crate::config::{self, Backing};
use crate::cuda::errors as cu;
use crate::cuda::CUresult;
use crate::gpu::Gpu;
use crate::state::STATE;
use gdrapi_support::cuda::fns;
use gdrapi_support::dl::Entry;
use libc::{c_char, c_int, c_uint, c_void, pid_t};
use std::cell::Cell;
use std::ffi::CStr;
use std::sync::Once;

/// Whether the Vulkan backing is selected.
pub fn active() -> bool {
    config::get().backing == Backing::Vulkan
}

/// Whether CUDA calls go to the real driver (Vulkan backing, `GDRSIM_REAL_LIBCUDA` not `none`).
pub fn forwarding() -> bool {
    active() && config::get().real_libcuda.as_deref() != Some("none")
}

thread_local! {
    static IN_DRIVER: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is inside a call the emulator made into Vulkan or CUDA: the
/// interposed C library functions must then pass straight through.
pub fn in_driver() -> bool {
    IN_DRIVER.with(|c| c.get() != 0)
}

struct DriverScope;

impl Drop for DriverScope {
    fn drop(&mut self) {
        IN_DRIVER.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Runs `f` (a call into Vulkan or the real CUDA driver) marked as such for this thread.
pub fn with_driver<T>(f: impl FnOnce() -> T) -> T {
    IN_DRIVER.with(|c| c.set(c.get() + 1));
    let _scope = DriverScope;
    f()
}

/// Prints a failure of the backing's set-up once per process (the caller gets a CUresult).
pub fn report(what: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| eprintln!("gdrsim: GDRSIM_BACKING=vulkan: {what}"));
}

#[cfg(target_env = "gnu")]
extern "C" {
    /// glibc's `on_exit`: like `atexit`, and the handler gets the exit status.
    fn on_exit(f: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
}

/// In a forked child's exit: flushes stdio and leaves with the same status, so that the
/// exit handlers of the GPU drivers (registered before the fork) do not run.
#[cfg(target_env = "gnu")]
extern "C" fn leave_without_driver_teardown(status: c_int, _arg: *mut c_void) {
    // SAFETY: fflush(NULL) flushes every stdio stream; _exit ends the process at once.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(status)
    }
}

/// Called in a forked child: when the parent has an arena, the child's `exit` skips the GPU
/// drivers' exit handlers, which would tear down objects of device files the child shares
/// with its parent.
pub fn after_fork_child() {
    // Why: on an H200, after a child exited normally its parent hung in its own exit; the
    // child's run of those handlers is the suspected cause.
    if !active() || !arena::inherited() {
        return;
    }
    #[cfg(target_env = "gnu")]
    // SAFETY: registers a plain extern "C" handler that lives as long as the process.
    unsafe {
        on_exit(leave_without_driver_teardown, std::ptr::null_mut());
    }
}

/// `cuInit`'s GPU: the arena for the Vulkan backing, `None` for the host backing.
pub fn create_gpu(pid: pid_t, gen: u64, size: u64) -> Option<Result<Gpu, CUresult>> {
    active().then(|| arena::create(pid, gen, size, forwarding()))
}

/// Calls the real driver's function `E` through `call`; CUDA_ERROR_NOT_FOUND when the real
/// driver is missing or lacks it.
fn real_call<E: Entry>(call: impl FnOnce(E::Fn) -> CUresult) -> CUresult {
    let Some(f) = libcuda::get().ok().and_then(|r| r.lib.get::<E>().ok()) else {
        return cu::NOT_FOUND;
    };
    with_driver(|| call(f))
}

/// `cuInit` of the real driver when forwarding (`None` otherwise); CUDA_ERROR_NO_DEVICE with
/// a message when no real driver can be loaded.
pub fn real_init(flags: c_uint) -> Option<CUresult> {
    if !forwarding() {
        return None;
    }
    if let Err(why) = libcuda::get() {
        report(&format!(
            "no real libcuda.so.1 ({why}); set GDRSIM_REAL_LIBCUDA=<path>, or =none"
        ));
        return Some(cu::NO_DEVICE);
    }
    // SAFETY: cuInit takes any flags value (the caller's).
    Some(real_call::<fns::cuInit>(|f| unsafe { f(flags) }))
}

/// When forwarding: `Some(Err(INVALID_CONTEXT))` unless the real driver has a context
/// current on this thread; `None` for the emulator's own context check.
pub fn ctx_check() -> Option<Result<(), CUresult>> {
    if !forwarding() {
        return None;
    }
    let mut ctx: *mut c_void = std::ptr::null_mut();
    // SAFETY: a writable slot.
    let r = real_call::<fns::cuCtxGetCurrent>(|f| unsafe { f(&mut ctx) });
    Some(match (r, ctx.is_null()) {
        (0, false) => Ok(()),
        (0, true) => Err(cu::INVALID_CONTEXT),
        (e, _) => Err(e),
    })
}

/// When forwarding: whether `ptr` lies outside the arena, so the real driver must handle it.
pub fn foreign(ptr: u64) -> bool {
    forwarding()
        && STATE
            .lock()
            .gpu()
            .is_none_or(|g| g.translate(ptr, 1).is_none())
}

/// When forwarding: whether `cuPointerGetAttribute(attr, ptr)` goes to the real driver: for
/// pointers outside the arena and for attributes the emulator does not answer itself (the
/// context and the device ordinal come from the real driver, which knows the arena).
pub fn forward_attribute(attr: c_int, ptr: u64) -> bool {
    forwarding() && (!matches!(attr, 2 | 3 | 5 | 6 | 7 | 11 | 12 | 13) || foreign(ptr))
}

/// Functions `cuGetProcAddress` hands out from the emulator even when forwarding.
const OWN_FUNCTIONS: [&str; 13] = [
    "cuInit",
    "cuMemAlloc",
    "cuMemAlloc_v2",
    "cuMemAllocPitch",
    "cuMemAllocPitch_v2",
    "cuMemFree",
    "cuMemFree_v2",
    "cuMemGetAddressRange",
    "cuPointerGetAttribute",
    "cuPointerGetAttributes",
    "cuPointerSetAttribute",
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
];

/// When forwarding: `cuGetProcAddress` (`entry` names which ABI) answered by the real driver,
/// except that the functions the emulator keeps ([`OWN_FUNCTIONS`]) come from `own`.
///
/// # Safety
///
/// As `cuGetProcAddress_v2`: `symbol` NULL or NUL-terminated, `pfn` and `status` NULL or
/// writable.
pub unsafe fn get_proc_address(
    entry: &str,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
    own: fn(&str) -> Option<usize>,
) -> Option<CUresult> {
    if !forwarding() {
        return None;
    }
    let r = if entry == "cuGetProcAddress_v2" {
        // SAFETY: the caller's arguments, under the same contract.
        real_call::<fns::cuGetProcAddress_v2>(|f| unsafe { f(symbol, pfn, version, flags, status) })
    } else {
        // SAFETY: the caller's arguments, under the same contract.
        real_call::<fns::cuGetProcAddress>(|f| unsafe { f(symbol, pfn, version, flags) })
    };
    if r == cu::SUCCESS && !symbol.is_null() && !pfn.is_null() {
        // SAFETY: symbol is a non-NULL NUL-terminated name from the caller.
        let name = unsafe { CStr::from_ptr(symbol) }.to_str().unwrap_or("");
        if OWN_FUNCTIONS.contains(&name) {
            if let Some(f) = own(name) {
                // SAFETY: pfn is non-NULL and writable (the real driver just wrote it).
                unsafe { *pfn = f as *mut c_void };
            }
        }
    }
    Some(r)
}

/// When forwarding: waits for the real driver's current context (`cuCtxSynchronize`) after a
/// successful call `r`, so that the emulator's synchronous memsets stay synchronous on a real
/// GPU (the driver runs `cuMemsetD8`/`cuMemsetD32` on device memory asynchronously).
pub fn synchronized(r: CUresult) -> CUresult {
    if r != cu::SUCCESS {
        return r;
    }
    // SAFETY: cuCtxSynchronize has no arguments.
    real_call::<fns::cuCtxSynchronize>(|f| unsafe { f() })
}

/// In a CUDA function of the emulator: when forwarding, returns the real driver's result of
/// the same function (by its exported name) with the same arguments; CUDA fault injection
/// (`GDRSIM_FAIL`) still applies first. With `sync` first, the result waits for the context
/// ([`synchronized`]).
macro_rules! passthrough {
    (sync $name:ident ( $($arg:ident : $ty:ty),* $(,)? )) => {
        $crate::vulkan::passthrough!(@go $crate::vulkan::synchronized, $name($($arg: $ty),*))
    };
    ($name:ident ( $($arg:ident : $ty:ty),* $(,)? )) => {
        $crate::vulkan::passthrough!(@go std::convert::identity, $name($($arg: $ty),*))
    };
    (@go $then:path, $name:ident ( $($arg:ident : $ty:ty),* )) => {
        if $crate::vulkan::forwarding() {
            return $crate::cuda::guarded(stringify!($name), || {
                if let Some(e) = $crate::fail::check(stringify!($name)) {
                    return e as $crate::cuda::CUresult;
                }
                static SLOT: std::sync::atomic::AtomicUsize =
                    std::sync::atomic::AtomicUsize::new(0);
                let Some(p) = $crate::vulkan::libcuda::symbol_cached(
                    &SLOT,
                    concat!(stringify!($name), "\0").as_bytes(),
                ) else {
                    return $crate::cuda::errors::NOT_FOUND;
                };
                let f: unsafe extern "C" fn($($ty),*) -> $crate::cuda::CUresult =
                    // SAFETY: `p` is the real driver's function of this very name, whose C
                    // prototype is this function's own.
                    unsafe { std::mem::transmute::<usize, _>(p) };
                // SAFETY: the caller's arguments, under the contract of the same function.
                $then(unsafe { f($($arg),*) })
            });
        }
    };
}
pub(crate) use passthrough;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_scope_nests_and_unwinds() {
        assert!(!in_driver());
        with_driver(|| {
            assert!(in_driver());
            with_driver(|| assert!(in_driver()));
            assert!(in_driver());
        });
        assert!(!in_driver());
        let r = std::panic::catch_unwind(|| with_driver(|| panic!("driver call panicked")));
        assert!(r.is_err());
        assert!(!in_driver(), "a panic must not leave the mark set");
    }

    #[test]
    fn host_backing_forwards_nothing() {
        // Unit tests run with the default settings.
        assert!(!active());
        assert!(!forwarding());
        assert!(create_gpu(1, 1, 64 << 20).is_none());
        assert_eq!(real_init(0), None);
        assert_eq!(ctx_check(), None);
        assert!(!foreign(0));
        assert!(!forward_attribute(1, 0));
    }

    /// The CUDA modules' sources, hookable's macro definition aside.
    const CUDA_SOURCES: [(&str, &str); 12] = [
        ("context.rs", include_str!("../cuda/context.rs")),
        ("device.rs", include_str!("../cuda/device.rs")),
        ("dmabuf.rs", include_str!("../cuda/dmabuf.rs")),
        ("events.rs", include_str!("../cuda/events.rs")),
        ("ipc.rs", include_str!("../cuda/ipc.rs")),
        ("legacy.rs", include_str!("../cuda/legacy.rs")),
        ("managed.rs", include_str!("../cuda/managed.rs")),
        ("memory.rs", include_str!("../cuda/memory.rs")),
        ("pointer.rs", include_str!("../cuda/pointer.rs")),
        ("procaddr.rs", include_str!("../cuda/procaddr.rs")),
        ("vmm.rs", include_str!("../cuda/vmm.rs")),
        ("mod.rs", include_str!("../cuda/mod.rs")),
    ];

    /// The text of the item starting at `at`: up to the first line that is a lone `}` or `);`.
    fn item(src: &str, at: usize) -> &str {
        let rest = &src[at..];
        let end = ["\n}\n", "\n);\n", "\n}\n\n"]
            .iter()
            .filter_map(|m| rest.find(m))
            .min()
            .unwrap_or(rest.len());
        &rest[..end]
    }

    fn fn_name(text: &str) -> String {
        let at = text.find("fn ").expect("an item with a function") + 3;
        text[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || "_$".contains(*c))
            .collect()
    }

    /// Every exported CUDA function, when forwarding, reaches the real driver: its body forwards
    /// (`passthrough!`), it calls another exported function, or it is one the emulator keeps
    /// for arena memory ([`OWN_FUNCTIONS`]). A consumer such as UCX mixes them, so one left on
    /// the emulator's fake state (a fake context or event) breaks the real ones.
    #[test]
    fn every_exported_cuda_function_forwards() {
        let mut checked = 0;
        let mut strays = Vec::new();
        for (file, src) in CUDA_SOURCES {
            let exported = src.match_indices("#[no_mangle]").map(|(i, _)| (i, false));
            let hooked = src
                .match_indices("\nhookable!(")
                .map(|(i, _)| (i + 1, true));
            for (at, is_hook) in exported.chain(hooked) {
                let text = if is_hook {
                    let rest = &src[at..];
                    &rest[..rest.find(");").expect("hookable!( ... );")]
                } else {
                    item(src, at)
                };
                let name = if is_hook {
                    let body: String = text
                        .lines()
                        .skip(1)
                        .map(str::trim)
                        .filter(|l| !l.starts_with("///"))
                        .collect();
                    body.chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect()
                } else {
                    fn_name(text)
                };
                // What runs: the item itself, or for an entry point with a patchable prologue
                // the implementation it calls.
                let target = text.rsplit("=> ").next().unwrap_or("").trim();
                let body = if is_hook && !target.starts_with("cu") {
                    let def = format!("fn {target}(");
                    let (impl_src, at) = CUDA_SOURCES
                        .iter()
                        .find_map(|(_, s)| s.find(&def).map(|at| (*s, at)))
                        .unwrap_or_else(|| panic!("{file}: {name}: no {target}"));
                    item(impl_src, at)
                } else {
                    text
                };
                let delegates = (is_hook && target.starts_with("cu"))
                    || body.match_indices("unsafe { ").any(|(i, _)| {
                        body[i + 9..].starts_with("cu") || body[i + 9..].starts_with("super::")
                    });
                checked += 1;
                if !(body.contains("passthrough!(")
                    || delegates
                    || OWN_FUNCTIONS.contains(&name.as_str()))
                {
                    strays.push(format!("{file}: {name}"));
                }
            }
        }
        assert!(
            checked > 80,
            "only {checked} exported functions found: the scan is broken"
        );
        assert!(
            strays.is_empty(),
            "not forwarded when GDRSIM_BACKING=vulkan: {strays:?}"
        );
    }
}
