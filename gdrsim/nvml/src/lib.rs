//! NVML for programs run on the emulator: the calls UCX's CUDA transports make, answering for
//! the one emulated GPU, a PCIe device without NVLink.
//!
//! Every exported function is an [`entry!`] of `gdrapi-boundary`: a panic in it returns
//! `NVML_ERROR_UNKNOWN` instead of unwinding into C.
//!
//! # Safety
//!
//! Every exported function has the C contract of the NVML function of the same name.

use gdrapi_boundary::entry;
use libc::{c_char, c_int, c_uint, c_void};

use gdrapi_abi::nvml::{
    nvmlReturn_t as NvmlReturn, FieldValue, Memory,
    NVML_ERROR_INVALID_ARGUMENT as INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED as NOT_SUPPORTED,
    NVML_ERROR_UNINITIALIZED as UNINITIALIZED, NVML_ERROR_UNKNOWN as ERROR_UNKNOWN,
    NVML_FI_DEV_NVLINK_LINK_COUNT as FI_NVLINK_LINK_COUNT, NVML_SUCCESS as SUCCESS,
    NVML_VALUE_TYPE_UNSIGNED_INT,
};

/// The handle of the one device (NVML handles are opaque pointers).
static DEVICE: u8 = 0;

entry! {
    /// `nvmlInit_v2`.
    on_panic(ERROR_UNKNOWN)
    fn nvmlInit_v2() -> NvmlReturn {
        SUCCESS
    }
}

entry! {
    /// `nvmlInit` (the pre-v2 ABI name).
    on_panic(ERROR_UNKNOWN)
    fn nvmlInit() -> NvmlReturn {
        SUCCESS
    }
}

entry! {
    /// `nvmlInitWithFlags`.
    on_panic(ERROR_UNKNOWN)
    fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
        SUCCESS
    }
}

entry! {
    /// `nvmlShutdown`.
    on_panic(ERROR_UNKNOWN)
    fn nvmlShutdown() -> NvmlReturn {
        SUCCESS
    }
}

entry! {
    /// `nvmlErrorString`: a static description for every code.
    on_panic(c"Unknown Error".as_ptr())
    fn nvmlErrorString(r: NvmlReturn) -> *const c_char {
        let s: &'static str = match r {
            SUCCESS => "Success\0",
            UNINITIALIZED => "Uninitialized\0",
            INVALID_ARGUMENT => "Invalid Argument\0",
            NOT_SUPPORTED => "Not Supported\0",
            _ => "Unknown Error\0",
        };
        s.as_ptr().cast()
    }
}

entry! {
    /// `nvmlDeviceGetCount_v2`.
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetCount_v2(n: *mut c_uint) -> NvmlReturn {
        if n.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: n is a non-NULL out-pointer from the caller.
        unsafe { n.write(1) };
        SUCCESS
    }
}

entry! {
    /// `nvmlDeviceGetHandleByIndex_v2`: index 0 only.
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetHandleByIndex_v2(
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
}

entry! {
    /// `nvmlDeviceGetHandleByIndex` (the pre-v2 ABI name).
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetHandleByIndex(
        index: c_uint,
        dev: *mut *const c_void,
    ) -> NvmlReturn {
        // SAFETY: same contract.
        unsafe { nvmlDeviceGetHandleByIndex_v2(index, dev) }
    }
}

entry! {
    /// `nvmlDeviceGetFieldValues`: the NVLink link count is 0; other fields are not supported.
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetFieldValues(
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
                v.value_type = NVML_VALUE_TYPE_UNSIGNED_INT;
                v.value = 0;
                v.nvml_return = SUCCESS;
            } else {
                v.nvml_return = NOT_SUPPORTED;
            }
        }
        SUCCESS
    }
}

entry! {
    /// `nvmlDeviceGetNvLinkRemotePciInfo_v2`: the device has no NVLink.
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
        _dev: *const c_void,
        _link: c_uint,
        _pci: *mut c_void,
    ) -> NvmlReturn {
        NOT_SUPPORTED
    }
}

entry! {
    /// `nvmlDeviceGetNvLinkRemotePciInfo` (the pre-v2 ABI name).
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetNvLinkRemotePciInfo(
        _dev: *const c_void,
        _link: c_uint,
        _pci: *mut c_void,
    ) -> NvmlReturn {
        NOT_SUPPORTED
    }
}

/// The emulator's `gdrsim_bar1_info` (BAR1 size, BAR1 in use, VRAM size), found in the process
/// (the emulator is preloaded); `None` without the emulator.
fn bar1_info() -> Option<(u64, u64, u64)> {
    type Info = unsafe extern "C" fn(*mut u64, *mut u64, *mut u64) -> c_int;
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no other precondition.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"gdrsim_bar1_info".as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: the emulator exports gdrsim_bar1_info with this prototype (gdrsim.h).
    let f = unsafe { std::mem::transmute::<*mut c_void, Info>(p) };
    let (mut t, mut u, mut v) = (0, 0, 0);
    // SAFETY: valid out-pointers.
    (unsafe { f(&mut t, &mut u, &mut v) } == 0).then_some((t, u, v))
}

fn is_device(dev: *const c_void) -> bool {
    std::ptr::eq(dev, (&raw const DEVICE).cast())
}

entry! {
    /// `nvmlDeviceGetBAR1MemoryInfo`: the emulator's BAR1 (`GDRSIM_BAR1_SIZE`, in use:
    /// `GDRSIM_BAR1_RESERVED` plus the process's live pins).
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetBAR1MemoryInfo(
        dev: *const c_void,
        m: *mut Memory,
    ) -> NvmlReturn {
        if !is_device(dev) || m.is_null() {
            return INVALID_ARGUMENT;
        }
        let Some((total, used, _)) = bar1_info() else {
            return NOT_SUPPORTED;
        };
        // SAFETY: m is a non-NULL out-pointer from the caller.
        unsafe {
            m.write(Memory {
                total,
                free: total - used,
                used,
            })
        };
        SUCCESS
    }
}

entry! {
    /// `nvmlDeviceGetMemoryInfo`: `GDRSIM_VRAM_SIZE` (allocations are not tracked: all free).
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetMemoryInfo(dev: *const c_void, m: *mut Memory) -> NvmlReturn {
        if !is_device(dev) || m.is_null() {
            return INVALID_ARGUMENT;
        }
        let Some((_, _, total)) = bar1_info() else {
            return NOT_SUPPORTED;
        };
        // SAFETY: m is a non-NULL out-pointer from the caller.
        unsafe {
            m.write(Memory {
                total,
                free: total,
                used: 0,
            })
        };
        SUCCESS
    }
}

entry! {
    /// `nvmlDeviceGetName`: the name `cuDeviceGetName` gives.
    on_panic(ERROR_UNKNOWN)
    fn nvmlDeviceGetName(
        dev: *const c_void,
        name: *mut c_char,
        len: c_uint,
    ) -> NvmlReturn {
        let text = b"gdrsim emulated GPU\0";
        if !is_device(dev) || name.is_null() {
            return INVALID_ARGUMENT;
        }
        if (len as usize) < text.len() {
            return 7; // NVML_ERROR_INSUFFICIENT_SIZE
        }
        // SAFETY: the caller gave `len` >= text.len() writable bytes at `name`.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), name.cast::<u8>(), text.len()) };
        SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_device_without_nvlink() {
        let mut dev = std::ptr::null();
        // SAFETY: valid out-pointers.
        let (first, second) = unsafe {
            (
                nvmlDeviceGetHandleByIndex_v2(0, &mut dev),
                nvmlDeviceGetHandleByIndex_v2(1, &mut dev),
            )
        };
        assert_eq!((first, second), (SUCCESS, INVALID_ARGUMENT));
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
        // SAFETY: no pointer arguments.
        assert!(!unsafe { nvmlErrorString(999) }.is_null());
    }

    #[test]
    fn a_panic_is_nvml_error_unknown() {
        let mut n = 0;
        gdrapi_boundary::testing::panic_next("nvmlDeviceGetCount_v2");
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut n) }, ERROR_UNKNOWN);
        assert_eq!(n, 0);
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut n) }, SUCCESS);
        assert_eq!(n, 1);
        gdrapi_boundary::testing::panic_next("nvmlErrorString");
        // SAFETY: no pointer arguments; the result is a static NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(nvmlErrorString(SUCCESS)) };
        assert_eq!(s.to_bytes(), b"Unknown Error");
    }
}
