//! CUresult codes: the names `cuGetErrorName` and `cuGetErrorString` give, from
//! `gdrapi_abi::cuda`'s table, and the codes the emulator returns.

pub use gdrapi_abi::cuda::status::*;
pub use gdrapi_abi::cuda::{error_code as code_of, error_name as name_of};
