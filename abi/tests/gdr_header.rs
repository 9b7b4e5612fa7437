//! `include/gdrapi.h` states what `gdrapi_abi::gdr` states: this test writes a C program of
//! `_Static_assert`s, one per fact of the Rust side (each type's size and signedness, each
//! struct's size, alignment, member count, offsets and sizes, each constant), compiles it with the header
//! and runs it (the bits of the `mapped` / `wc_mapping` bitfields are compared at run time).

mod c;

use c::Layout;
use gdrapi_abi::gdr::*;
use std::fmt::Write as _;
use std::mem::{align_of, offset_of, size_of};

fn layouts() -> Vec<Layout> {
    vec![
        layout!("gdr_mh_t", gdr_mh_t, [h]),
        // `flags` is the unit of the two bitfields, which have no offset in C: checked apart.
        layout!(
            "gdr_info_v2_t",
            gdr_info_v2_t,
            [
                va,
                mapped_size,
                page_size,
                tm_cycles,
                cycles_per_ms,
                mapping_type
            ]
        ),
        layout!("gdr_info_t", gdr_info_t, [va, mapping_type]),
    ]
}

/// `(C type, Rust size, Rust type unsigned)` of each integer type.
fn int_types() -> Vec<(&'static str, usize, bool)> {
    vec![
        ("gdr_pin_flags_t", size_of::<gdr_pin_flags_t>(), true),
        ("gdr_mapping_type_t", size_of::<gdr_mapping_type_t>(), true),
        ("gdr_map_flags_t", size_of::<gdr_map_flags_t>(), true),
        ("gdr_attr_t", size_of::<gdr_attr_t>(), true),
    ]
}

/// `(C macro or enumerator, Rust value)` of each constant.
fn constants() -> Vec<(&'static str, i128)> {
    vec![
        ("GDR_PIN_FLAG_DEFAULT", GDR_PIN_FLAG_DEFAULT.into()),
        ("GDR_PIN_FLAG_FORCE_PCIE", GDR_PIN_FLAG_FORCE_PCIE.into()),
        ("GDR_MAPPING_TYPE_NONE", GDR_MAPPING_TYPE_NONE.into()),
        ("GDR_MAPPING_TYPE_WC", GDR_MAPPING_TYPE_WC.into()),
        ("GDR_MAPPING_TYPE_CACHING", GDR_MAPPING_TYPE_CACHING.into()),
        ("GDR_MAPPING_TYPE_DEVICE", GDR_MAPPING_TYPE_DEVICE.into()),
        ("GDR_MAPPING_TYPE_MAX", GDR_MAPPING_TYPE_MAX.into()),
        ("GDR_MAP_FLAG_DEFAULT", GDR_MAP_FLAG_DEFAULT.into()),
        (
            "GDR_MAP_FLAG_REQ_WC_MAPPING",
            GDR_MAP_FLAG_REQ_WC_MAPPING.into(),
        ),
        (
            "GDR_MAP_FLAG_REQ_CACHE_MAPPING",
            GDR_MAP_FLAG_REQ_CACHE_MAPPING.into(),
        ),
        (
            "GDR_MAP_FLAG_REQ_DEVICE_MAPPING",
            GDR_MAP_FLAG_REQ_DEVICE_MAPPING.into(),
        ),
        (
            "GDR_ATTR_USE_PERSISTENT_MAPPING",
            GDR_ATTR_USE_PERSISTENT_MAPPING.into(),
        ),
        (
            "GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE",
            GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE.into(),
        ),
        (
            "GDR_ATTR_USING_DMA_BUF_MMAP",
            GDR_ATTR_USING_DMA_BUF_MMAP.into(),
        ),
        ("GDR_ATTR_MAX", GDR_ATTR_MAX.into()),
        ("MAJOR_VERSION_SHIFT", MAJOR_VERSION_SHIFT.into()),
        ("GDR_API_MAJOR_VERSION", GDR_API_MAJOR_VERSION.into()),
        ("GDR_API_MINOR_VERSION", GDR_API_MINOR_VERSION.into()),
        ("GDR_API_VERSION", GDR_API_VERSION.into()),
        ("MINIMUM_GDRDRV_VERSION", MINIMUM_GDRDRV_VERSION.into()),
        ("GPU_PAGE_SHIFT", GPU_PAGE_SHIFT.into()),
        ("GPU_PAGE_SIZE", GPU_PAGE_SIZE as i128),
        ("GPU_PAGE_OFFSET", GPU_PAGE_OFFSET as i128),
        ("GPU_PAGE_MASK", GPU_PAGE_MASK as i128),
    ]
}

/// The C program of every fact.
fn program() -> String {
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <string.h>\n#include <gdrapi.h>\n\n",
    );
    for l in layouts() {
        src += &l.asserts();
    }
    for (t, a) in [
        ("gdr_mh_t", align_of::<gdr_mh_t>()),
        ("gdr_info_v2_t", align_of::<gdr_info_v2_t>()),
    ] {
        writeln!(
            src,
            "_Static_assert(_Alignof({t}) == {a}, \"{t} aligned to {a}\");"
        )
        .unwrap();
    }
    // A positional initializer of exactly as many members as the Rust side has (`flags`
    // counting as its two bitfields): -Wextra's missing-field-initializers and the
    // excess-elements error catch any other count.
    for (t, n) in [("gdr_mh_t", 1), ("gdr_info_v2_t", 8)] {
        let zeros = vec!["0"; n].join(", ");
        writeln!(
            src,
            "extern const {t} members_{t};\nconst {t} members_{t} = {{ {zeros} }};"
        )
        .unwrap();
    }
    writeln!(
        src,
        "_Static_assert(sizeof(gdr_t) == {}, \"gdr_t is a pointer\");",
        size_of::<gdr_t>()
    )
    .unwrap();
    for (t, size, unsigned) in int_types() {
        writeln!(
            src,
            "_Static_assert(sizeof({t}) == {size} && (({t})-1 > 0) == {}, \"{t}: {size} bytes, unsigned {unsigned}\");",
            u8::from(unsigned)
        )
        .unwrap();
    }
    for (c, v) in constants() {
        writeln!(src, "_Static_assert(({c}) == {v:#x}, \"{c} is {v:#x}\");").unwrap();
    }
    // The bitfield unit follows `cycles_per_ms`; `mapping_type` follows the unit.
    let flags = offset_of!(gdr_info_v2_t, flags);
    writeln!(
        src,
        "_Static_assert(offsetof(gdr_info_v2_t, cycles_per_ms) + 4 == {flags} && \
         offsetof(gdr_info_v2_t, mapping_type) == {flags} + sizeof(unsigned), \
         \"gdr_info_v2_t: the bitfield unit at {flags}\");"
    )
    .unwrap();
    // The legacy struct is the first bytes of gdr_info_v2_t.
    for (f, off) in [
        ("va", offset_of!(gdr_info_v1_t, va)),
        ("mapped_size", offset_of!(gdr_info_v1_t, mapped_size)),
        ("page_size", offset_of!(gdr_info_v1_t, page_size)),
        ("tm_cycles", offset_of!(gdr_info_v1_t, tm_cycles)),
        ("cycles_per_ms", offset_of!(gdr_info_v1_t, cycles_per_ms)),
        ("mapping_type", size_of::<gdr_info_v1_t>()),
    ] {
        writeln!(
            src,
            "_Static_assert(offsetof(gdr_info_v2_t, {f}) == {off}, \"gdr_info_v1_t: {f} at {off}\");"
        )
        .unwrap();
    }
    write!(
        src,
        "\nstatic unsigned unit(int wc)\n{{\n    gdr_info_v2_t i;\n    unsigned u;\n\
         \x20   memset(&i, 0, sizeof i);\n    if (wc)\n        i.wc_mapping = 1;\n    else\n        i.mapped = 1;\n\
         \x20   memcpy(&u, (const char *)&i + {flags}, sizeof u);\n    return u;\n}}\n\n\
         int main(void)\n{{\n\
         \x20   if (unit(0) != {mapped}u || unit(1) != {wc}u) {{\n\
         \x20       fprintf(stderr, \"mapped is %#x, wc_mapping %#x\\n\", unit(0), unit(1));\n\
         \x20       return 1;\n    }}\n    return 0;\n}}\n",
        mapped = INFO_MAPPED_BIT,
        wc = INFO_WC_MAPPING_BIT,
    )
    .unwrap();
    src
}

fn include() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../include")
}

#[test]
fn the_c_header_states_the_rust_definitions() {
    c::compile_and_run("gdr_header", &program(), &[&include()]);
}

/// The comparison notices drift: each edit of a type or a constant in the header fails,
/// naming what changed. (`tests/header_sync.rs` does the same for the prototypes.)
#[test]
fn every_kind_of_drift_is_caught() {
    let good = std::fs::read_to_string(include().join("gdrapi.h")).expect("read gdrapi.h");
    let edits = [
        (
            "    uint32_t page_size;",
            "    uint64_t page_size;",
            "gdr_info_v2_t.page_size",
        ),
        (
            "    unsigned wc_mapping:1;",
            "    unsigned wc_mapping:1;\n    unsigned char extra;",
            "gdr_info_v2_t",
        ),
        (
            "    unsigned mapped:1;      /* a CPU mapping exists */\n    unsigned wc_mapping:1;",
            "    unsigned wc_mapping:1;\n    unsigned mapped:1;",
            "mapped is",
        ),
        (
            "GDR_MAPPING_TYPE_DEVICE  = 3",
            "GDR_MAPPING_TYPE_DEVICE  = 5",
            "GDR_MAPPING_TYPE_DEVICE",
        ),
        (
            "GDR_ATTR_USING_DMA_BUF_MMAP          = 3,",
            "",
            "GDR_ATTR_USING_DMA_BUF_MMAP",
        ),
        (
            "#define GDR_API_MINOR_VERSION    6",
            "#define GDR_API_MINOR_VERSION    7",
            "GDR_API_MINOR_VERSION",
        ),
    ];
    let program = program();
    for (i, (from, to, what)) in edits.into_iter().enumerate() {
        assert!(
            good.contains(from),
            "edit target {from:?} not in the header"
        );
        let name = format!("gdr_header_edit_{i}");
        let dir = c::scratch(&format!("{name}_h"));
        std::fs::write(dir.join("gdrapi.h"), good.replacen(from, to, 1)).expect("write");
        match c::try_compile_and_run(&name, &program, &[&dir]) {
            Ok(()) => panic!("editing {from:?} -> {to:?} went unnoticed"),
            Err(e) => assert!(
                e.contains(what),
                "editing {from:?} -> {to:?} failed without naming {what}:\n{e}"
            ),
        }
    }
}

/// The C harness's own copy of where `struct gdr` keeps its backend, and the values it compares
/// with (`harness/check.h`), state `CACHE_BACKEND_*`.
#[test]
fn the_c_harness_reads_the_backend_where_the_rust_side_says() {
    let mut src = String::from("#include \"check.h\"\n\n");
    for (name, value) in [
        ("GDR_CACHE_BACKEND_OFFSET", CACHE_BACKEND_OFFSET as i128),
        ("GDR_CACHE_BACKEND_GDRDRV", CACHE_BACKEND_GDRDRV.into()),
        ("GDR_CACHE_BACKEND_DMABUF", CACHE_BACKEND_DMABUF.into()),
        ("GDR_CACHE_BACKEND_VULKAN", CACHE_BACKEND_VULKAN.into()),
    ] {
        writeln!(src, "_Static_assert({name} == {value}, \"{name}\");").unwrap();
    }
    src += "\nint main(void) { return 0; }\n";
    let harness = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../harness");
    c::compile_and_run("check_h_backend", &src, &[&harness]);
}
