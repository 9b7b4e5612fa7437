//! The CUDA driver, loaded at run time only (`dlopen`, never a link dependency), for the
//! DMA-BUF and Vulkan backends: [`load`] gives the process-wide [`Driver`], whose methods wrap
//! the few entry points the backends call; [`Contexts`] gives their calls a current context. `CUresult` values never leave this module raw: they become
//! errno values through the table in [`result`].

pub mod contexts;
pub mod driver;
pub mod loader;
pub mod result;
pub mod types;

#[cfg(test)]
pub(crate) mod fake;

pub use contexts::Contexts;
pub use driver::{Api, Context, CuError, Driver, Missing, Vmm, VmmApi};
pub use loader::{load, LoadError, Requirement, FOR_DMABUF, FOR_VULKAN};
pub use result::errno_of;
