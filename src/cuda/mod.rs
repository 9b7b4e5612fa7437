//! The CUDA driver, loaded at run time only (`dlopen`, never a link dependency), for the
//! DMA-BUF backend: [`load`] gives the process-wide [`Driver`], whose methods wrap the few
//! entry points the backend calls. `CUresult` values never leave this module raw: they become
//! errno values through the table in [`result`].

pub mod driver;
pub mod loader;
pub mod result;
pub mod types;

#[cfg(test)]
pub(crate) mod fake;

pub use driver::{Api, Context, CuError, Driver};
pub use loader::{load, LoadError};
pub use result::errno_of;
