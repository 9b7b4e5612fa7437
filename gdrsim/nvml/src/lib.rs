//! NVML for programs run on the emulator: the calls UCX's CUDA transports make, answering for
//! the one emulated GPU, a PCIe device without NVLink.
//!
//! # Safety
//!
//! Every exported function has the C contract of the NVML function of the same name.

use libc::{c_char, c_int, c_uint, c_void};

/// `nvmlReturn_t`.
pub type NvmlReturn = c_int;

const SUCCESS: NvmlReturn = 0;
const UNINITIALIZED: NvmlReturn = 1;
const INVALID_ARGUMENT: NvmlReturn = 2;
const NOT_SUPPORTED: NvmlReturn = 3;

/// The handle of the one device (NVML handles are opaque pointers).
static DEVICE: u8 = 0;

/// `nvmlFieldValue_t`.
#[repr(C)]
pub struct FieldValue {
    field_id: c_uint,
    scope_id: c_uint,
    timestamp: i64,
    latency_usec: i64,
    value_type: c_int,
    nvml_return: NvmlReturn,
    value: u64,
}

/// `NVML_FI_DEV_NVLINK_LINK_COUNT`.
const FI_NVLINK_LINK_COUNT: c_uint = 91;

/// `nvmlInit_v2`.
#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    SUCCESS
}

/// `nvmlInit` (the pre-v2 ABI name).
#[no_mangle]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    SUCCESS
}

/// `nvmlInitWithFlags`.
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    SUCCESS
}

/// `nvmlShutdown`.
#[no_mangle]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    SUCCESS
}

/// `nvmlErrorString`: a static description for every code.
#[no_mangle]
pub extern "C" fn nvmlErrorString(r: NvmlReturn) -> *const c_char {
    let s: &'static str = match r {
        SUCCESS => "Success\0",
        UNINITIALIZED => "Uninitialized\0",
        INVALID_ARGUMENT => "Invalid Argument\0",
        NOT_SUPPORTED => "Not Supported\0",
        _ => "Unknown Error\0",
    };
    s.as_ptr().cast()
}

/// `nvmlDeviceGetCount_v2`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what NVML reads or writes through them.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(n: *mut c_uint) -> NvmlReturn {
    if n.is_null() {
        return INVALID_ARGUMENT;
    }
    // SAFETY: n is a non-NULL out-pointer from the caller.
    unsafe { n.write(1) };
    SUCCESS
}

/// `nvmlDeviceGetHandleByIndex_v2`: index 0 only.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what NVML reads or writes through them.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    dev: *mut *const c_void,
) -> NvmlReturn {
    if index != 0 || dev.is_null() {
        return INVALID_ARGUMENT;
    }
    // SAFETY: dev is a non-NULL out-pointer from the caller.
    unsafe { dev.write((&raw const DEVICE).cast()) };
    SUCCESS
}

/// `nvmlDeviceGetHandleByIndex` (the pre-v2 ABI name).
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what NVML reads or writes through them.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(
    index: c_uint,
    dev: *mut *const c_void,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetHandleByIndex_v2(index, dev) }
}

/// `nvmlDeviceGetFieldValues`: the NVLink link count is 0; other fields are not supported.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what NVML reads or writes through them.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    dev: *const c_void,
    count: c_int,
    values: *mut FieldValue,
) -> NvmlReturn {
    if dev != (&raw const DEVICE).cast() || count < 0 || (count > 0 && values.is_null()) {
        return INVALID_ARGUMENT;
    }
    for i in 0..count as usize {
        // SAFETY: the caller passes `count` field values.
        let v = unsafe { &mut *values.add(i) };
        if v.field_id == FI_NVLINK_LINK_COUNT {
            v.value_type = 1; // NVML_VALUE_TYPE_UNSIGNED_INT
            v.value = 0;
            v.nvml_return = SUCCESS;
        } else {
            v.nvml_return = NOT_SUPPORTED;
        }
    }
    SUCCESS
}

/// `nvmlDeviceGetNvLinkRemotePciInfo_v2`: the device has no NVLink.
#[no_mangle]
pub extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    _dev: *const c_void,
    _link: c_uint,
    _pci: *mut c_void,
) -> NvmlReturn {
    NOT_SUPPORTED
}

/// `nvmlDeviceGetNvLinkRemotePciInfo` (the pre-v2 ABI name).
#[no_mangle]
pub extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo(
    _dev: *const c_void,
    _link: c_uint,
    _pci: *mut c_void,
) -> NvmlReturn {
    NOT_SUPPORTED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_device_without_nvlink() {
        let mut dev = std::ptr::null();
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { nvmlDeviceGetHandleByIndex_v2(0, &mut dev) }, SUCCESS);
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { nvmlDeviceGetHandleByIndex_v2(1, &mut dev) }, INVALID_ARGUMENT);
        let mut v = FieldValue {
            field_id: FI_NVLINK_LINK_COUNT,
            scope_id: 0,
            timestamp: 0,
            latency_usec: 0,
            value_type: 0,
            nvml_return: -1,
            value: 7,
        };
        // SAFETY: one valid field value.
        assert_eq!(unsafe { nvmlDeviceGetFieldValues(dev, 1, &mut v) }, SUCCESS);
        assert_eq!((v.nvml_return, v.value), (SUCCESS, 0));
        assert!(!nvmlErrorString(999).is_null());
    }
}
