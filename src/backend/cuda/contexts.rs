//! Current contexts for a backend's driver calls: the caller's own where its thread has one,
//! else the device's primary context, retained once per device for the life of the backend.

use super::driver::{Context, CuError, Driver};
use super::types::CUdevice;
use parking_lot::Mutex;

/// A primary context retained, and its device.
#[derive(Debug, Clone, Copy)]
struct Retained {
    dev: CUdevice,
    ctx: Context,
}

/// The primary contexts one backend retained; released by [`Contexts::release_all`] or on
/// drop.
#[derive(Debug)]
pub struct Contexts {
    cuda: &'static Driver,
    retained: Mutex<Vec<Retained>>,
}

impl Contexts {
    /// None retained yet.
    pub fn new(cuda: &'static Driver) -> Contexts {
        Contexts {
            cuda,
            retained: Mutex::new(Vec::new()),
        }
    }

    /// The primary context of `dev`, retained on first use.
    fn primary(&self, dev: CUdevice) -> Result<Context, CuError> {
        let mut list = self.retained.lock();
        if let Some(r) = list.iter().find(|r| r.dev == dev) {
            return Ok(r.ctx);
        }
        let ctx = self.cuda.retain_primary_context(dev)?;
        crate::gdr_dbg!("retained the primary context of device {dev}");
        list.push(Retained { dev, ctx });
        Ok(ctx)
    }

    /// Runs `f` with a current context: the caller's if the thread has one, else the primary
    /// context of `dev`, made current for the call and unbound again afterwards.
    pub fn with_current<T>(
        &self,
        dev: CUdevice,
        f: impl FnOnce() -> Result<T, CuError>,
    ) -> Result<T, CuError> {
        if self.cuda.current_context()?.is_some() {
            return f();
        }
        let ctx = self.primary(dev)?;
        self.cuda.set_current_context(Some(ctx))?;
        let out = f();
        if let Err(e) = self.cuda.set_current_context(None) {
            crate::gdr_warn!(
                "could not restore the thread's CUDA context: \"{}\" failed ({}: {})",
                e.call,
                e.code,
                self.cuda.describe(e.code)
            );
        }
        out
    }

    /// Releases every retained primary context (idempotent).
    pub fn release_all(&self) {
        let list = std::mem::take(&mut *self.retained.lock());
        for r in list {
            if let Err(e) = self.cuda.release_primary_context(r.dev) {
                crate::gdr_warn!(
                    "\"{}\" failed for device {} ({}: {})",
                    e.call,
                    r.dev,
                    e.code,
                    self.cuda.describe(e.code)
                );
            }
        }
    }
}

impl Drop for Contexts {
    fn drop(&mut self) {
        self.release_all();
    }
}
