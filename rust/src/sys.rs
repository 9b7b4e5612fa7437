//! The C libraries, loaded at run time: `libgdrapi.so.2` (gdrcopy's API, `gdrapi.h`) and
//! `libgdrapi_ext.so.0` (host-written memory, `gdrapi_ext.h`), each opened by soname once per
//! process and kept loaded. Loading at run time keeps the crate buildable (and its
//! documentation) where neither library is installed, and lets a program that never allocates
//! host-written memory run with `libgdrapi.so.2` alone, NVIDIA's or gdrapi-rs's.

use crate::error::Error;
use libloading::Library;
use std::ffi::{c_int, c_uint, c_ulong, c_ulonglong, c_void};
use std::sync::OnceLock;

/// `gdr_t`.
pub type GdrT = *mut c_void;
/// `gdrx_t`.
pub type GdrxT = *mut c_void;

/// `gdr_mh_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemHandle {
    pub h: c_ulong,
}

/// `gdr_info_v2_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct InfoV2 {
    pub va: u64,
    pub mapped_size: u64,
    pub page_size: u32,
    pub tm_cycles: u64,
    pub cycles_per_ms: u32,
    /// Bit 0 `mapped`, bit 1 `wc_mapping`.
    pub bits: c_uint,
    pub mapping_type: c_int,
}

/// `gdrx_mem_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GdrxMem {
    pub dev_ptr: c_ulonglong,
    pub cpu_ptr: *mut c_void,
    pub size: usize,
    pub handle: u64,
}

impl Default for GdrxMem {
    fn default() -> GdrxMem {
        GdrxMem {
            dev_ptr: 0,
            cpu_ptr: std::ptr::null_mut(),
            size: 0,
            handle: 0,
        }
    }
}

/// `gdrx_info_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GdrxInfo {
    pub device: c_int,
    pub backend: c_int,
    pub memory: c_int,
    pub mapping_type: c_int,
    pub chunk_size: usize,
    pub small_max: usize,
    pub allocations: usize,
    pub pins: usize,
    pub bytes_pinned: usize,
    pub bytes_in_use: usize,
    pub reserved: [u64; 4],
}

/// The soname of gdrcopy's library.
pub const LIBGDRAPI: &str = "libgdrapi.so.2";
/// The soname of the host-written memory library.
pub const LIBGDRAPI_EXT: &str = "libgdrapi_ext.so.0";

/// The functions of `libgdrapi.so.2` this crate calls.
pub struct Gdr {
    pub open: unsafe extern "C" fn() -> GdrT,
    pub close: unsafe extern "C" fn(GdrT) -> c_int,
    pub pin_buffer: unsafe extern "C" fn(GdrT, c_ulong, usize, u64, u32, *mut MemHandle) -> c_int,
    pub unpin_buffer: unsafe extern "C" fn(GdrT, MemHandle) -> c_int,
    pub map: unsafe extern "C" fn(GdrT, MemHandle, *mut *mut c_void, usize) -> c_int,
    pub unmap: unsafe extern "C" fn(GdrT, MemHandle, *mut c_void, usize) -> c_int,
    pub get_info_v2: unsafe extern "C" fn(GdrT, MemHandle, *mut InfoV2) -> c_int,
    pub copy_to_mapping:
        unsafe extern "C" fn(MemHandle, *mut c_void, *const c_void, usize) -> c_int,
    pub copy_from_mapping:
        unsafe extern "C" fn(MemHandle, *mut c_void, *const c_void, usize) -> c_int,
    pub runtime_get_version: unsafe extern "C" fn(*mut c_int, *mut c_int),
    pub driver_get_version: unsafe extern "C" fn(GdrT, *mut c_int, *mut c_int) -> c_int,
    pub get_attribute: unsafe extern "C" fn(GdrT, c_int, *mut c_int) -> c_int,
    /// Whether the library is gdrapi-rs's, which is thread-safe: it exports the
    /// `gdr_copy_to_mapped` alias, NVIDIA's does not. NVIDIA's gdrcopy "is not thread-safe",
    /// so with it the crate serializes every call but the copies (see [`Gdr::serialize`]).
    pub thread_safe: bool,
    /// Held around calls other than copies when the library is not thread-safe.
    pub serialize: parking::Lock,
    _lib: Library,
}

/// The functions of `libgdrapi_ext.so.0`.
pub struct Gdrx {
    pub runtime_get_version: unsafe extern "C" fn(*mut c_int, *mut c_int),
    pub open: unsafe extern "C" fn(*mut GdrxT, c_int, c_uint) -> c_int,
    pub close: unsafe extern "C" fn(GdrxT) -> c_int,
    pub alloc: unsafe extern "C" fn(GdrxT, usize, usize, *mut GdrxMem) -> c_int,
    pub free: unsafe extern "C" fn(GdrxT, *const GdrxMem) -> c_int,
    pub copy_to: unsafe extern "C" fn(*const GdrxMem, usize, *const c_void, usize) -> c_int,
    pub copy_from: unsafe extern "C" fn(*const GdrxMem, usize, *mut c_void, usize) -> c_int,
    pub lookup: unsafe extern "C" fn(GdrxT, c_ulonglong, *mut GdrxMem, *mut usize) -> c_int,
    pub info: unsafe extern "C" fn(GdrxT, *mut GdrxInfo) -> c_int,
    _lib: Library,
}

/// A lock that is only taken when it is needed (a library that is not thread-safe).
pub mod parking {
    use std::sync::{Mutex, MutexGuard};

    /// A mutex around calls into a library that is not thread-safe.
    #[derive(Debug, Default)]
    pub struct Lock(Mutex<()>);

    impl Lock {
        /// Takes the lock when `needed`. A panic while it was held does not make it unusable:
        /// it guards no data.
        pub fn hold(&self, needed: bool) -> Option<MutexGuard<'_, ()>> {
            needed.then(|| self.0.lock().unwrap_or_else(|e| e.into_inner()))
        }
    }
}

/// Opens `name` and resolves each listed symbol into the struct's field of the same name.
macro_rules! load {
    ($ty:ident, $name:expr, { $($field:ident = $sym:literal),* $(,)? } $(, $extra:ident = $value:expr)*) => {{
        // SAFETY: loading runs the library's initialisers; libgdrapi and libgdrapi_ext are
        // meant to be loaded this way (NCCL, NVSHMEM and TensorRT-LLM dlopen libgdrapi too).
        let lib = unsafe { Library::new($name) }.map_err(|e| Error::Load {
            library: $name,
            reason: e.to_string(),
        })?;
        $(
            // SAFETY: the field's type is the prototype the C header declares for the symbol.
            let $field = *unsafe { lib.get($sym) }.map_err(|e| Error::Load {
                library: $name,
                reason: e.to_string(),
            })?;
        )*
        $ty { $($field,)* $($extra: $value,)* _lib: lib }
    }};
}

fn load_gdr() -> Result<Gdr, Error> {
    // SAFETY: probing for a symbol reads the library's tables only; the library was loaded
    // just before by the same name (the handle stays alive meanwhile).
    let marker =
        |lib: &Library| unsafe { lib.get::<*const c_void>(b"gdr_copy_to_mapped\0") }.is_ok();
    let mut g = load!(Gdr, LIBGDRAPI, {
        open = b"gdr_open\0",
        close = b"gdr_close\0",
        pin_buffer = b"gdr_pin_buffer\0",
        unpin_buffer = b"gdr_unpin_buffer\0",
        map = b"gdr_map\0",
        unmap = b"gdr_unmap\0",
        get_info_v2 = b"gdr_get_info_v2\0",
        copy_to_mapping = b"gdr_copy_to_mapping\0",
        copy_from_mapping = b"gdr_copy_from_mapping\0",
        runtime_get_version = b"gdr_runtime_get_version\0",
        driver_get_version = b"gdr_driver_get_version\0",
        get_attribute = b"gdr_get_attribute\0",
    }, thread_safe = false, serialize = parking::Lock::default());
    g.thread_safe = marker(&g._lib);
    Ok(g)
}

fn load_gdrx() -> Result<Gdrx, Error> {
    Ok(load!(Gdrx, LIBGDRAPI_EXT, {
        runtime_get_version = b"gdrx_runtime_get_version\0",
        open = b"gdrx_open\0",
        close = b"gdrx_close\0",
        alloc = b"gdrx_alloc\0",
        free = b"gdrx_free\0",
        copy_to = b"gdrx_copy_to\0",
        copy_from = b"gdrx_copy_from\0",
        lookup = b"gdrx_lookup\0",
        info = b"gdrx_info\0",
    }))
}

static GDR: OnceLock<Result<Gdr, Error>> = OnceLock::new();
static GDRX: OnceLock<Result<Gdrx, Error>> = OnceLock::new();

/// `libgdrapi.so.2`, loaded at the first call.
pub fn gdr() -> Result<&'static Gdr, Error> {
    GDR.get_or_init(load_gdr).as_ref().map_err(Clone::clone)
}

/// `libgdrapi_ext.so.0`, loaded at the first call.
pub fn gdrx() -> Result<&'static Gdrx, Error> {
    GDRX.get_or_init(load_gdrx).as_ref().map_err(Clone::clone)
}

/// 0, or the errno as an [`Error`].
pub fn check(rc: c_int) -> Result<(), Error> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::from_errno(rc))
    }
}

/// This crate is published and cannot use the workspace's `gdrapi-abi`, so it declares the C
/// types it passes itself; this test compiles their layout against the workspace's
/// `include/gdrapi.h` (skipped where the header is absent, as in the packaged crate).
#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn the_c_types_have_gdrapi_hs_layout() {
        let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include");
        if !include.join("gdrapi.h").exists() {
            eprintln!("skipped: no ../include/gdrapi.h (outside the workspace)");
            return;
        }
        let mut src = String::from("#include <stddef.h>\n#include <gdrapi.h>\n");
        let mut fact = |cond: String| {
            src += &format!("_Static_assert({cond}, \"{cond}\");\n");
        };
        fact(format!("sizeof(gdr_t) == {}", size_of::<GdrT>()));
        fact(format!("sizeof(gdr_mh_t) == {}", size_of::<MemHandle>()));
        fact(format!(
            "offsetof(gdr_mh_t, h) == {}",
            offset_of!(MemHandle, h)
        ));
        fact(format!("sizeof(gdr_info_v2_t) == {}", size_of::<InfoV2>()));
        for (f, off) in [
            ("va", offset_of!(InfoV2, va)),
            ("mapped_size", offset_of!(InfoV2, mapped_size)),
            ("page_size", offset_of!(InfoV2, page_size)),
            ("tm_cycles", offset_of!(InfoV2, tm_cycles)),
            ("cycles_per_ms", offset_of!(InfoV2, cycles_per_ms)),
            ("mapping_type", offset_of!(InfoV2, mapping_type)),
        ] {
            fact(format!("offsetof(gdr_info_v2_t, {f}) == {off}"));
        }
        // The bitfields' unit follows cycles_per_ms.
        fact(format!(
            "offsetof(gdr_info_v2_t, cycles_per_ms) + 4 == {}",
            offset_of!(InfoV2, bits)
        ));
        fact(format!(
            "sizeof(gdr_mapping_type_t) == {}",
            size_of::<c_int>()
        ));
        src += "int main(void) { return 0; }\n";
        let dir = std::env::temp_dir().join(format!("gdrapi-rs-sys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let c = dir.join("layout.c");
        std::fs::write(&c, &src).expect("write the C program");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(&cc)
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-c", "-o"])
            .arg(dir.join("layout.o"))
            .arg("-I")
            .arg(&include)
            .arg(&c)
            .output()
            .unwrap_or_else(|e| panic!("run {cc}: {e}"));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "src/sys.rs disagrees with include/gdrapi.h:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
