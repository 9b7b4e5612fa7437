//! Shared code of the gdrcopy tools: `gdrcopy_copybw`, `gdrcopy_copylat`, `gdrcopy_apiperf`
//! (upstream's benchmarks, same flags and result lines) and `gdrcopy doctor`.
//!
//! Both the CUDA driver and libgdrapi are loaded at run time (`gdrapi_support::dl`), so the
//! tools start on any machine and say precisely what is missing.

pub mod cli;
pub mod cuda;
pub mod doctor;
pub mod gdr;
pub mod gpumem;
pub mod output;
pub mod tool;
