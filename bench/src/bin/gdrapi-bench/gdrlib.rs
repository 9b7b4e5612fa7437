//! A `libgdrapi.so` loaded by path with `RTLD_LOCAL`, and a mapping made through its own
//! public API on device memory from `libcuda.so.1` (the emulator's, under `LD_PRELOAD`, or a
//! real driver). Two libraries loaded this way side by side each keep their own state, so one
//! run can time both on the same kind of mapping.

use gdrapi::backend::MappingType;
use gdrapi_bench::cuda::DeviceMemory;
use gdrapi_support::dl::Library;
use gdrapi_support::gdr::{gdr_info_v2_t, gdr_mh_t, gdr_t, Api, CopyFn, GDR_MAP_FLAG_DEFAULT};
use std::ffi::c_int;

use crate::target::Target;

/// One library, loaded from a path, with an open `gdr_t`.
pub struct Lib {
    name: String,
    api: Api,
    g: gdr_t,
    _lib: Library,
}

impl Lib {
    /// Loads the library at `path` and calls its `gdr_open`.
    pub fn open(name: &str, path: &str) -> Result<Lib, String> {
        let lib = Library::open(path).map_err(|e| e.to_string())?;
        let api = Api::load(&lib).map_err(|e| e.to_string())?;
        // SAFETY: gdr_open takes no arguments.
        let g = unsafe { (api.open)() };
        if g.is_null() {
            return Err(format!("{name}: gdr_open() returned NULL ({path})"));
        }
        Ok(Lib {
            name: name.into(),
            api,
            g,
            _lib: lib,
        })
    }

    /// The library's `gdr_copy_to_mapping`.
    pub fn copy_to_mapping(&self) -> CopyFn {
        self.api.copy_to_mapping
    }

    /// The library's `gdr_copy_from_mapping`.
    pub fn copy_from_mapping(&self) -> CopyFn {
        self.api.copy_from_mapping
    }
}

impl Drop for Lib {
    fn drop(&mut self) {
        // SAFETY: the gdr_t from this library's gdr_open, closed once.
        unsafe { (self.api.close)(self.g) };
    }
}

/// Device memory pinned and mapped through one library.
pub struct Mapping<'a> {
    lib: &'a Lib,
    mh: gdr_mh_t,
    pinned: bool,
    va: *mut std::ffi::c_void,
    map_len: usize,
    offset: usize,
    len: usize,
    kind: MappingType,
}

impl<'a> Mapping<'a> {
    /// Pins and maps `mem` through `lib` (several libraries may map the same memory).
    pub fn new(lib: &'a Lib, mem: &'a DeviceMemory<'a>) -> Result<Mapping<'a>, String> {
        let (dptr, len) = (mem.device_ptr(), mem.len());
        let mut m = Mapping {
            lib,
            mh: gdr_mh_t::default(),
            pinned: false,
            va: std::ptr::null_mut(),
            map_len: 0,
            offset: 0,
            len,
            kind: MappingType::None,
        };
        let api = &lib.api;
        let fail = |call: &str, rc| format!("{}: {call} failed: {rc}", lib.name);
        // SAFETY: a live gdr_t and a writable handle; `Drop` unpins.
        let rc = unsafe { (api.pin_buffer)(lib.g, dptr as _, len, 0, 0, &mut m.mh) };
        if rc != 0 {
            return Err(fail("gdr_pin_buffer", rc));
        }
        m.pinned = true;
        let mut info = gdr_info_v2_t::default();
        // SAFETY: the live pin and a writable gdr_info_v2_t.
        let rc = unsafe { (api.get_info_v2)(lib.g, m.mh, &mut info) };
        if rc != 0 {
            return Err(fail("gdr_get_info", rc));
        }
        m.offset = (dptr - info.va) as usize;
        let mut va = std::ptr::null_mut();
        let map_len = info.mapped_size as usize;
        // SAFETY: the live pin, a writable address and its pinned size; `Drop` unmaps.
        let rc =
            unsafe { (api.map_v2)(lib.g, m.mh, &mut va, map_len, GDR_MAP_FLAG_DEFAULT as c_int) };
        if rc != 0 {
            return Err(fail("gdr_map", rc));
        }
        (m.va, m.map_len) = (va, map_len);
        // SAFETY: as above.
        let rc = unsafe { (api.get_info_v2)(lib.g, m.mh, &mut info) };
        if rc != 0 {
            return Err(fail("gdr_get_info", rc));
        }
        m.kind = MappingType::from_raw(info.mapping_type).unwrap_or(MappingType::None);
        Ok(m)
    }

    /// The handle to pass to the library's copy functions.
    pub fn handle(&self) -> gdr_mh_t {
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
        let (api, g) = (&self.lib.api, self.lib.g);
        if !self.va.is_null() {
            // SAFETY: the mapping `new` made, unmapped once with its length.
            unsafe { (api.unmap)(g, self.mh, self.va, self.map_len) };
        }
        if self.pinned {
            // SAFETY: the pin `new` made, unpinned once, after its mapping.
            unsafe { (api.unpin_buffer)(g, self.mh) };
        }
    }
}
