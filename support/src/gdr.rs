//! libgdrapi's C API as a program that loads it sees it (`gdrapi.h` 2.6): the types passed
//! across it (`gdrapi_abi::gdr`, re-exported) and the table of its public functions, resolved
//! from a [`Library`] by name, so the tools and the benchmarks work with any compatible
//! `libgdrapi.so.2` and never link one.

use crate::dl::{DlError, Entry, Library};
use std::ffi::{c_int, c_ulong, c_void};

pub use gdrapi_abi::gdr::*;

/// The soname programs load.
pub const LIBGDRAPI: &str = "libgdrapi.so.2";

/// The public functions called through [`Api`], each its name and `gdrapi.h`'s prototype.
pub mod fns {
    use super::*;

    crate::entries! {
        gdr_open = fn() -> gdr_t;
        gdr_close = fn(gdr_t) -> c_int;
        gdr_pin_buffer = fn(gdr_t, c_ulong, usize, u64, u32, *mut gdr_mh_t) -> c_int;
        gdr_unpin_buffer = fn(gdr_t, gdr_mh_t) -> c_int;
        gdr_map_v2 = fn(gdr_t, gdr_mh_t, *mut *mut c_void, usize, c_int) -> c_int;
        gdr_unmap = fn(gdr_t, gdr_mh_t, *mut c_void, usize) -> c_int;
        gdr_get_info_v2 = fn(gdr_t, gdr_mh_t, *mut gdr_info_v2_t) -> c_int;
        gdr_copy_to_mapping = fn(gdr_mh_t, *mut c_void, *const c_void, usize) -> c_int;
        gdr_copy_from_mapping = fn(gdr_mh_t, *mut c_void, *const c_void, usize) -> c_int;
        gdr_runtime_get_version = fn(*mut c_int, *mut c_int);
        gdr_driver_get_version = fn(gdr_t, *mut c_int, *mut c_int) -> c_int;
        gdr_get_attribute = fn(gdr_t, gdr_attr_t, *mut c_int) -> c_int;
    }
}

type Fn<E> = <E as Entry>::Fn;

/// `gdr_copy_to_mapping` / `gdr_copy_from_mapping` (same shape: handle, dst, src, size).
pub type CopyFn = Fn<fns::gdr_copy_to_mapping>;

/// The public functions of one loaded libgdrapi.
#[derive(Clone, Copy, Debug)]
pub struct Api {
    /// `gdr_open`.
    pub open: Fn<fns::gdr_open>,
    /// `gdr_close`.
    pub close: Fn<fns::gdr_close>,
    /// `gdr_pin_buffer`.
    pub pin_buffer: Fn<fns::gdr_pin_buffer>,
    /// `gdr_unpin_buffer`.
    pub unpin_buffer: Fn<fns::gdr_unpin_buffer>,
    /// `gdr_map_v2`.
    pub map_v2: Fn<fns::gdr_map_v2>,
    /// `gdr_unmap`.
    pub unmap: Fn<fns::gdr_unmap>,
    /// `gdr_get_info_v2`.
    pub get_info_v2: Fn<fns::gdr_get_info_v2>,
    /// `gdr_copy_to_mapping`.
    pub copy_to_mapping: CopyFn,
    /// `gdr_copy_from_mapping`.
    pub copy_from_mapping: CopyFn,
    /// `gdr_runtime_get_version`.
    pub runtime_get_version: Fn<fns::gdr_runtime_get_version>,
    /// `gdr_driver_get_version`.
    pub driver_get_version: Fn<fns::gdr_driver_get_version>,
    /// `gdr_get_attribute`.
    pub get_attribute: Fn<fns::gdr_get_attribute>,
}

impl Api {
    /// Resolves every function from `lib`; the error names the first one missing.
    pub fn load(lib: &Library) -> Result<Api, DlError> {
        Ok(Api {
            open: lib.get::<fns::gdr_open>()?,
            close: lib.get::<fns::gdr_close>()?,
            pin_buffer: lib.get::<fns::gdr_pin_buffer>()?,
            unpin_buffer: lib.get::<fns::gdr_unpin_buffer>()?,
            map_v2: lib.get::<fns::gdr_map_v2>()?,
            unmap: lib.get::<fns::gdr_unmap>()?,
            get_info_v2: lib.get::<fns::gdr_get_info_v2>()?,
            copy_to_mapping: lib.get::<fns::gdr_copy_to_mapping>()?,
            copy_from_mapping: lib.get::<fns::gdr_copy_from_mapping>()?,
            runtime_get_version: lib.get::<fns::gdr_runtime_get_version>()?,
            driver_get_version: lib.get::<fns::gdr_driver_get_version>()?,
            get_attribute: lib.get::<fns::gdr_get_attribute>()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_without_the_api_names_the_first_missing_function() {
        let lib = Library::open("libc.so.6").expect("libc loads");
        let e = Api::load(&lib).unwrap_err();
        assert_eq!(e.to_string(), "libc.so.6 does not export gdr_open");
    }
}
