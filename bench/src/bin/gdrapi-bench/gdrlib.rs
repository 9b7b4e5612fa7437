//! A `libgdrapi.so` loaded with `dlopen(RTLD_LOCAL)` by path, and a mapping made through its
//! own public API on memory from `libcuda.so.1` (the emulator's, under `LD_PRELOAD`, or a
//! real driver). Two libraries loaded this way side by side each keep their own state, so one
//! run can time both on the same kind of mapping.

use std::ffi::{c_int, c_uint, c_ulong, c_void, CString};

use gdrapi::backend::MappingType;

use crate::target::Target;

/// `gdr_mh_t`: a struct holding one `unsigned long`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Mh {
    h: c_ulong,
}

/// `gdr_info_v2_t` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct InfoV2 {
    va: u64,
    mapped_size: u64,
    page_size: u32,
    tm_cycles: u64,
    cycles_per_ms: u32,
    /// Bit 0: mapped, bit 1: wc_mapping.
    flags: c_uint,
    mapping_type: c_int,
    _pad: u32,
}

type Gdr = *mut c_void;
/// `gdr_copy_to_mapping` / `gdr_copy_from_mapping` (same shape: handle, dst, src, size).
pub type CopyFn = unsafe extern "C" fn(Mh, *mut c_void, *const c_void, usize) -> c_int;

struct Api {
    open: unsafe extern "C" fn() -> Gdr,
    close: unsafe extern "C" fn(Gdr) -> c_int,
    pin: unsafe extern "C" fn(Gdr, c_ulong, usize, u64, u32, *mut Mh) -> c_int,
    unpin: unsafe extern "C" fn(Gdr, Mh) -> c_int,
    map: unsafe extern "C" fn(Gdr, Mh, *mut *mut c_void, usize) -> c_int,
    unmap: unsafe extern "C" fn(Gdr, Mh, *mut c_void, usize) -> c_int,
    info: unsafe extern "C" fn(Gdr, Mh, *mut InfoV2) -> c_int,
    to: CopyFn,
    from: CopyFn,
}

/// An open handle to a shared library.
pub struct Dl(*mut c_void);

impl Dl {
    /// `dlopen(path, RTLD_NOW | RTLD_LOCAL)`.
    pub fn open(path: &str) -> Result<Dl, String> {
        let c = CString::new(path).map_err(|_| format!("bad path {path:?}"))?;
        // SAFETY: a valid C string; dlopen has no other preconditions.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            return Err(format!("dlopen({path}) failed: {}", dlerror()));
        }
        Ok(Dl(h))
    }

    /// The address of `name`, as a function pointer of type `T`.
    ///
    /// # Safety
    /// `T` must be a function pointer type matching the symbol's real signature.
    pub unsafe fn sym<T: Copy>(&self, name: &str) -> Result<T, String> {
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        let c = CString::new(name).map_err(|_| format!("bad symbol {name:?}"))?;
        // SAFETY: a live handle and a valid C string.
        let p = unsafe { libc::dlsym(self.0, c.as_ptr()) };
        if p.is_null() {
            return Err(format!("symbol {name} not found: {}", dlerror()));
        }
        // SAFETY: the caller vouches that `T` is the symbol's function pointer type, and the
        // sizes match (asserted above).
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a valid C string owned by the C library.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-NULL C string from dlerror.
    unsafe { std::ffi::CStr::from_ptr(e) }
        .to_string_lossy()
        .into_owned()
}

/// The few CUDA driver calls needed to get device memory (from `libcuda.so.1`).
pub struct Cuda {
    _dl: Dl,
    alloc: unsafe extern "C" fn(*mut u64, usize) -> c_int,
    free: unsafe extern "C" fn(u64) -> c_int,
}

impl Cuda {
    /// Loads `libcuda.so.1`, initialises it and makes device 0's primary context current.
    pub fn open() -> Result<Cuda, String> {
        let dl = Dl::open("libcuda.so.1")?;
        // SAFETY: the signatures are the CUDA driver API's (cuda.h).
        unsafe {
            let init: unsafe extern "C" fn(c_uint) -> c_int = dl.sym("cuInit")?;
            let get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int = dl.sym("cuDeviceGet")?;
            let retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int =
                dl.sym("cuDevicePrimaryCtxRetain")?;
            let set: unsafe extern "C" fn(*mut c_void) -> c_int = dl.sym("cuCtxSetCurrent")?;
            let alloc = dl.sym("cuMemAlloc_v2")?;
            let free = dl.sym("cuMemFree_v2")?;
            check("cuInit", init(0))?;
            let mut dev = 0;
            check("cuDeviceGet", get(&mut dev, 0))?;
            let mut ctx = std::ptr::null_mut();
            check("cuDevicePrimaryCtxRetain", retain(&mut ctx, dev))?;
            check("cuCtxSetCurrent", set(ctx))?;
            Ok(Cuda {
                _dl: dl,
                alloc,
                free,
            })
        }
    }
}

fn check(what: &str, rc: c_int) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with {rc}"))
    }
}

/// One library, loaded from a path, with an open `gdr_t`.
pub struct Lib {
    name: String,
    api: Api,
    g: Gdr,
    _dl: Dl,
}

impl Lib {
    /// Loads the library at `path` and calls its `gdr_open`.
    pub fn open(name: &str, path: &str) -> Result<Lib, String> {
        let dl = Dl::open(path)?;
        // SAFETY: the signatures are those of gdrapi.h (2.6).
        let api = unsafe {
            Api {
                open: dl.sym("gdr_open")?,
                close: dl.sym("gdr_close")?,
                pin: dl.sym("gdr_pin_buffer")?,
                unpin: dl.sym("gdr_unpin_buffer")?,
                map: dl.sym("gdr_map")?,
                unmap: dl.sym("gdr_unmap")?,
                info: dl.sym("gdr_get_info_v2")?,
                to: dl.sym("gdr_copy_to_mapping")?,
                from: dl.sym("gdr_copy_from_mapping")?,
            }
        };
        // SAFETY: gdr_open takes no arguments.
        let g = unsafe { (api.open)() };
        if g.is_null() {
            return Err(format!("{name}: gdr_open() returned NULL ({path})"));
        }
        Ok(Lib {
            name: name.into(),
            api,
            g,
            _dl: dl,
        })
    }

    /// The library's `gdr_copy_to_mapping`.
    pub fn copy_to_mapping(&self) -> CopyFn {
        self.api.to
    }

    /// The library's `gdr_copy_from_mapping`.
    pub fn copy_from_mapping(&self) -> CopyFn {
        self.api.from
    }
}

impl Drop for Lib {
    fn drop(&mut self) {
        // SAFETY: the gdr_t from this library's gdr_open, closed once.
        unsafe { (self.api.close)(self.g) };
    }
}

/// Device memory from `cuMemAlloc`, freed on drop.
pub struct DeviceMemory<'a> {
    cuda: &'a Cuda,
    dptr: u64,
    len: usize,
}

impl<'a> DeviceMemory<'a> {
    /// Allocates `len` bytes rounded up to 64 KiB GPU pages.
    pub fn new(cuda: &'a Cuda, len: usize) -> Result<DeviceMemory<'a>, String> {
        let len = len.div_ceil(1 << 16) * (1 << 16);
        let mut dptr = 0;
        // SAFETY: a valid out-pointer.
        check("cuMemAlloc", unsafe { (cuda.alloc)(&mut dptr, len) })?;
        Ok(DeviceMemory { cuda, dptr, len })
    }
}

impl Drop for DeviceMemory<'_> {
    fn drop(&mut self) {
        // SAFETY: the allocation made in `new`, freed once (after every mapping of it is
        // gone: mappings borrow this value).
        unsafe { (self.cuda.free)(self.dptr) };
    }
}

/// Device memory pinned and mapped through one library.
pub struct Mapping<'a> {
    lib: &'a Lib,
    dptr: u64,
    mh: Mh,
    pinned: bool,
    va: *mut c_void,
    map_len: usize,
    offset: usize,
    len: usize,
    kind: MappingType,
}

impl<'a> Mapping<'a> {
    /// Pins and maps `mem` through `lib` (several libraries may map the same memory).
    pub fn new(lib: &'a Lib, mem: &'a DeviceMemory<'a>) -> Result<Mapping<'a>, String> {
        let len = mem.len;
        let mut m = Mapping {
            lib,
            dptr: mem.dptr,
            mh: Mh::default(),
            pinned: false,
            va: std::ptr::null_mut(),
            map_len: 0,
            offset: 0,
            len,
            kind: MappingType::None,
        };
        let api = &lib.api;
        // SAFETY: gdrapi calls with valid out-pointers; on failure `Drop` undoes
        // whatever succeeded.
        unsafe {
            let rc = (api.pin)(lib.g, m.dptr as c_ulong, len, 0, 0, &mut m.mh);
            if rc != 0 {
                return Err(format!("{}: gdr_pin_buffer failed: {rc}", lib.name));
            }
            m.pinned = true;
            let mut info = InfoV2::default();
            let rc = (api.info)(lib.g, m.mh, &mut info);
            if rc != 0 {
                return Err(format!("{}: gdr_get_info failed: {rc}", lib.name));
            }
            m.map_len = info.mapped_size as usize;
            m.offset = (m.dptr - info.va) as usize;
            let mut va = std::ptr::null_mut();
            let rc = (api.map)(lib.g, m.mh, &mut va, m.map_len);
            if rc != 0 {
                m.map_len = 0;
                return Err(format!("{}: gdr_map failed: {rc}", lib.name));
            }
            m.va = va;
            let rc = (api.info)(lib.g, m.mh, &mut info);
            if rc != 0 {
                return Err(format!("{}: gdr_get_info failed: {rc}", lib.name));
            }
            m.kind = MappingType::from_raw(info.mapping_type as u32).unwrap_or(MappingType::None);
        }
        Ok(m)
    }

    /// The handle to pass to the library's copy functions.
    pub fn handle(&self) -> Mh {
        self.mh
    }
}

impl Target for Mapping<'_> {
    fn describe(&self) -> String {
        format!(
            "{} MiB mapped through {} ({:?})",
            self.len >> 20,
            self.lib.name,
            self.kind
        )
    }
    fn ptr(&self) -> *mut u8 {
        self.va.cast::<u8>().wrapping_add(self.offset)
    }
    fn len(&self) -> usize {
        self.len
    }
    fn kind(&self) -> MappingType {
        self.kind
    }
}

impl Drop for Mapping<'_> {
    fn drop(&mut self) {
        let api = &self.lib.api;
        // SAFETY: undoes, in reverse order, exactly the steps `new` completed.
        unsafe {
            if !self.va.is_null() {
                (api.unmap)(self.lib.g, self.mh, self.va, self.map_len);
            }
            if self.pinned {
                (api.unpin)(self.lib.g, self.mh);
            }
        }
    }
}
