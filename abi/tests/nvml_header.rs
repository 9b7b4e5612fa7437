//! `gdrapi_abi::nvml` against the real `nvml.h` (from the nvidia-nvml-dev wheel): a C program
//! with a static assertion of each type's size, each structure's layout, the success code and
//! each prototype, compiled with the header.
//!
//! The header is found in `NVML_INCLUDE`, else in the `nvidia` Python package. Without it the
//! test says so and passes, except under `CI`, where it fails.

mod c;

use gdrapi_abi::nvml::*;
use std::fmt::Write as _;
use std::mem::size_of;

/// Each function with the prototype of `pfn`'s type of that name, spelled in C.
const PROTOTYPES: [(&str, &str); 8] = [
    ("nvmlInit_v2", "nvmlReturn_t (*)(void)"),
    ("nvmlShutdown", "nvmlReturn_t (*)(void)"),
    ("nvmlErrorString", "const char *(*)(nvmlReturn_t)"),
    ("nvmlDeviceGetCount_v2", "nvmlReturn_t (*)(unsigned int *)"),
    (
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlReturn_t (*)(unsigned int, nvmlDevice_t *)",
    ),
    (
        "nvmlDeviceGetName",
        "nvmlReturn_t (*)(nvmlDevice_t, char *, unsigned int)",
    ),
    (
        "nvmlDeviceGetBAR1MemoryInfo",
        "nvmlReturn_t (*)(nvmlDevice_t, nvmlBAR1Memory_t *)",
    ),
    (
        "nvmlDeviceGetMemoryInfo",
        "nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t *)",
    ),
];

#[test]
fn the_declarations_are_nvml_hs() {
    let hint = "pip install nvidia-nvml-dev-cu12";
    let Some(include) = c::wheel_include("NVML_INCLUDE", "nvml.h", hint) else {
        return;
    };
    let mut src = String::from("#include <stddef.h>\n#include <nvml.h>\n\n");
    for (t, size) in [
        ("nvmlReturn_t", size_of::<nvmlReturn_t>()),
        ("nvmlDevice_t", size_of::<nvmlDevice_t>()),
    ] {
        writeln!(
            src,
            "_Static_assert(sizeof({t}) == {size}, \"{t} is {size} bytes\");"
        )
        .unwrap();
    }
    for (name, value) in [
        ("NVML_SUCCESS", NVML_SUCCESS),
        ("NVML_ERROR_UNINITIALIZED", NVML_ERROR_UNINITIALIZED),
        ("NVML_ERROR_INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT),
        ("NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED),
        ("NVML_ERROR_UNKNOWN", NVML_ERROR_UNKNOWN),
        (
            "NVML_FI_DEV_NVLINK_LINK_COUNT",
            NVML_FI_DEV_NVLINK_LINK_COUNT as i32,
        ),
        ("NVML_VALUE_TYPE_UNSIGNED_INT", NVML_VALUE_TYPE_UNSIGNED_INT),
    ] {
        writeln!(src, "_Static_assert({name} == {value}, \"{name}\");").unwrap();
    }
    src += &layout!(
        "nvmlFieldValue_t",
        FieldValue,
        [
            field_id => "fieldId",
            scope_id => "scopeId",
            timestamp,
            latency_usec => "latencyUsec",
            value_type => "valueType",
            nvml_return => "nvmlReturn",
            value,
        ]
    )
    .asserts();
    src += &layout!(
        "nvmlBAR1Memory_t",
        Memory,
        [total => "bar1Total", free => "bar1Free", used => "bar1Used"]
    )
    .asserts();
    src += &layout!("nvmlMemory_t", Memory, [total, free, used]).asserts();
    // The prototypes of `pfn`, spelled in C here, are the header's.
    for (f, proto) in PROTOTYPES {
        writeln!(
            src,
            "_Static_assert(__builtin_types_compatible_p(__typeof__(&{f}), {proto}), \"{f} is {proto}\");"
        )
        .unwrap();
    }
    src += "\nint main(void) { return 0; }\n";
    c::compile_and_run("nvml_header", &src, &[&include]);
}
