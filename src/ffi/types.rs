//! The public C types of `gdrapi.h`, with upstream's names and layouts: defined once in
//! `gdrapi_abi::gdr` (checked there against `include/gdrapi.h`) and re-exported here for the
//! `entry!` declarations.

pub use gdrapi_abi::gdr::*;
