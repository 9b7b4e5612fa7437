//! `include/gdrdrv_abi.h` states what `gdrapi_abi::gdrdrv` states: this test writes a C
//! program of `_Static_assert`s, one per fact of the Rust side (each request's value, each
//! struct's size and each field's offset, each constant), compiles it with the header and runs
//! it (the device path, a string, is compared at run time).

mod c;

use c::Layout;
use gdrapi_abi::gdrdrv::*;
use std::fmt::Write as _;

fn layouts() -> Vec<Layout> {
    vec![
        layout!(
            "struct gdrdrv_pin_buffer_params",
            PinParams,
            [addr, size, p2p_token, va_space, _pad => "pad", handle]
        ),
        layout!("struct gdrdrv_unpin_buffer_params", UnpinParams, [handle]),
        layout!(
            "struct gdrdrv_get_cb_flag_params",
            CbFlagParams,
            [handle, flag, _pad => "pad"]
        ),
        layout!(
            "struct gdrdrv_get_info_params",
            InfoParams,
            [
                handle,
                va,
                mapped_size,
                page_size,
                tsc_khz,
                tm_cycles,
                mapped,
                wc_mapping
            ]
        ),
        layout!(
            "struct gdrdrv_get_info_v2_params",
            InfoV2Params,
            [handle, va, mapped_size, page_size, tsc_khz, tm_cycles, mapping_type, _pad => "pad"]
        ),
        layout!("struct gdrdrv_get_attr_params", AttrParams, [attr, val]),
        layout!(
            "struct gdrdrv_pin_buffer_v2_params",
            PinV2Params,
            [addr, size, flags, _pad => "pad", handle]
        ),
        layout!(
            "struct gdrdrv_req_mapping_type_params",
            ReqMappingTypeParams,
            [handle, mapping_type, _pad => "pad"]
        ),
        layout!(
            "struct gdrdrv_get_version_params",
            VersionParams,
            [gdrdrv_version, minimum_gdr_api_version]
        ),
    ]
}

/// `(C macro, Rust value)` of each integer constant.
fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("GDRDRV_IOCTL_TYPE", IOCTL_TYPE.into()),
        ("GDRDRV_DRIVER_VERSION_2_6", DRIVER_VERSION.into()),
        (
            "GDRDRV_MINIMUM_GDR_API_VERSION",
            MINIMUM_GDR_API_VERSION.into(),
        ),
        (
            "GDRDRV_MINIMUM_VERSION_WITH_GET_INFO_V2",
            VERSION_WITH_GET_INFO_V2.into(),
        ),
        (
            "GDRDRV_MINIMUM_VERSION_WITH_GET_ATTR",
            VERSION_WITH_V2_API.into(),
        ),
        (
            "GDRDRV_MINIMUM_VERSION_WITH_PIN_BUFFER_V2",
            VERSION_WITH_V2_API.into(),
        ),
        (
            "GDRDRV_MINIMUM_VERSION_WITH_REQ_MAPPING_TYPE",
            VERSION_WITH_V2_API.into(),
        ),
        ("GDRDRV_VERSION(2, 6)", version(2, 6).into()),
        ("GDRDRV_GPU_PAGE_SHIFT", GPU_PAGE_SHIFT.into()),
        ("GDRDRV_GPU_PAGE_SIZE", GPU_PAGE_SIZE),
        ("GDRDRV_MR_NONE", MR_NONE.into()),
        ("GDRDRV_MR_WC", MR_WC.into()),
        ("GDRDRV_MR_CACHING", MR_CACHING.into()),
        ("GDRDRV_MR_DEVICE", MR_DEVICE.into()),
        ("GDRDRV_PIN_FLAG_DEFAULT", PIN_FLAG_DEFAULT.into()),
        ("GDRDRV_PIN_FLAG_FORCE_PCIE", PIN_FLAG_FORCE_PCIE.into()),
        (
            "GDRDRV_ATTR_USE_PERSISTENT_MAPPING",
            ATTR_USE_PERSISTENT_MAPPING.into(),
        ),
        (
            "GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE",
            ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE.into(),
        ),
    ]
}

#[test]
fn the_c_header_states_the_rust_definitions() {
    let mut src =
        String::from("#include <stddef.h>\n#include <string.h>\n#include \"gdrdrv_abi.h\"\n\n");
    for r in REQUESTS {
        let (c, since) = (format!("GDRDRV_IOC_{}", r.name), r.since);
        writeln!(
            src,
            "_Static_assert({c} == {:#x}UL, \"{c} is {:#x}\");",
            r.value, r.value
        )
        .unwrap();
        if since > version(2, 0) {
            writeln!(
                src,
                "_Static_assert(GDRDRV_MINIMUM_VERSION_WITH_{} == {since:#x}u, \"{} since {since:#x}\");",
                r.name, r.name
            )
            .unwrap();
        }
    }
    let layouts = layouts();
    for l in &layouts {
        src += &l.asserts();
    }
    // Each request's struct is the one the Rust table sizes.
    assert_eq!(layouts.len(), REQUESTS.len());
    for (r, l) in REQUESTS.iter().zip(&layouts) {
        assert_eq!(r.params_size, l.size, "{}: {}", r.name, l.name);
        let lower = r.name.to_ascii_lowercase();
        assert_eq!(l.name, format!("struct gdrdrv_{lower}_params"));
    }
    for (c, v) in constants() {
        writeln!(src, "_Static_assert(({c}) == {v:#x}UL, \"{c} is {v:#x}\");").unwrap();
    }
    let path = DEVICE_PATH.to_str().unwrap();
    writeln!(
        src,
        "\nint main(void) {{ return strcmp(GDRDRV_DEVICE_PATH, \"{path}\") != 0; }}"
    )
    .unwrap();
    let include = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    c::compile_and_run("gdrdrv_header", &src, &[&include]);
}
