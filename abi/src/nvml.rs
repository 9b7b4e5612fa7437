//! The NVML declarations the workspace uses (`nvml.h`): the return code, the device handle,
//! the memory figures and the prototypes of the functions loaded by name. The library (BAR1
//! figures for a failed pin's log line), `support` (the doctor) and the emulator's NVML use them;
//! `tests/nvml_header.rs` compiles each against the real `nvml.h`.

#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_uint, c_void};

/// `nvmlReturn_t`: 0 is success. An enum in `nvml.h`, passed as a 32-bit integer; a `c_int`
/// here for the reason `cuda::CUresult` is one (any code a library returns is a value).
pub type nvmlReturn_t = c_int;
/// `nvmlDevice_t` (opaque).
pub type nvmlDevice_t = *mut c_void;

/// `NVML_SUCCESS`.
pub const NVML_SUCCESS: nvmlReturn_t = 0;
/// `NVML_ERROR_UNINITIALIZED`: `nvmlInit` has not been called.
pub const NVML_ERROR_UNINITIALIZED: nvmlReturn_t = 1;
/// `NVML_ERROR_INVALID_ARGUMENT`.
pub const NVML_ERROR_INVALID_ARGUMENT: nvmlReturn_t = 2;
/// `NVML_ERROR_NOT_SUPPORTED`.
pub const NVML_ERROR_NOT_SUPPORTED: nvmlReturn_t = 3;
/// `NVML_ERROR_UNKNOWN`.
pub const NVML_ERROR_UNKNOWN: nvmlReturn_t = 999;

/// `NVML_FI_DEV_NVLINK_LINK_COUNT`: the field id of a device's NVLink link count.
pub const NVML_FI_DEV_NVLINK_LINK_COUNT: c_uint = 91;
/// `NVML_VALUE_TYPE_UNSIGNED_INT`: a field value's `value` read as an `unsigned int`.
pub const NVML_VALUE_TYPE_UNSIGNED_INT: c_int = 1;

/// The soname NVML is loaded by.
pub const LIBNVML: &str = "libnvidia-ml.so.1";

/// `nvmlBAR1Memory_t`, and `nvmlMemory_t` (version 1), which has the same layout: sizes in
/// bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Total bytes.
    pub total: u64,
    /// Free bytes.
    pub free: u64,
    /// Used bytes.
    pub used: u64,
}

/// `nvmlFieldValue_t`: one field of `nvmlDeviceGetFieldValues`, its id in and its value out.
/// `value` is `nvmlValue_t`, a union of 8 bytes, here as its widest member.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldValue {
    /// `fieldId`: which field (`NVML_FI_*`).
    pub field_id: c_uint,
    /// `scopeId`: which link or scope of the field.
    pub scope_id: c_uint,
    /// `timestamp`, in microseconds.
    pub timestamp: i64,
    /// `latencyUsec`.
    pub latency_usec: i64,
    /// `valueType` (`NVML_VALUE_TYPE_*`).
    pub value_type: c_int,
    /// `nvmlReturn`: this field's own result.
    pub nvml_return: nvmlReturn_t,
    /// `value`.
    pub value: u64,
}

/// The prototype of each function loaded, named as the function.
pub mod pfn {
    use super::*;
    /// `nvmlInit_v2`.
    pub type nvmlInit_v2 = unsafe extern "C" fn() -> nvmlReturn_t;
    /// `nvmlShutdown`.
    pub type nvmlShutdown = unsafe extern "C" fn() -> nvmlReturn_t;
    /// `nvmlErrorString`: a static string, or NULL.
    pub type nvmlErrorString = unsafe extern "C" fn(nvmlReturn_t) -> *const c_char;
    /// `nvmlDeviceGetCount_v2`.
    pub type nvmlDeviceGetCount_v2 = unsafe extern "C" fn(*mut c_uint) -> nvmlReturn_t;
    /// `nvmlDeviceGetHandleByIndex_v2`.
    pub type nvmlDeviceGetHandleByIndex_v2 =
        unsafe extern "C" fn(c_uint, *mut nvmlDevice_t) -> nvmlReturn_t;
    /// `nvmlDeviceGetName`: the name into a buffer of the given length.
    pub type nvmlDeviceGetName =
        unsafe extern "C" fn(nvmlDevice_t, *mut c_char, c_uint) -> nvmlReturn_t;
    /// `nvmlDeviceGetBAR1MemoryInfo`.
    pub type nvmlDeviceGetBAR1MemoryInfo =
        unsafe extern "C" fn(nvmlDevice_t, *mut Memory) -> nvmlReturn_t;
    /// `nvmlDeviceGetMemoryInfo` (`nvmlMemory_t` version 1).
    pub type nvmlDeviceGetMemoryInfo =
        unsafe extern "C" fn(nvmlDevice_t, *mut Memory) -> nvmlReturn_t;
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn memory_is_three_u64() {
        assert_eq!(size_of::<Memory>(), 24);
        assert_eq!(offset_of!(Memory, free), 8);
        assert_eq!(offset_of!(Memory, used), 16);
    }
}
