//! gdrdrv backend: `/dev/gdrdrv` ioctls and mmap. (Being written.)

use super::{Attr, Backend, BackendKind, Info, Mapping, MappingType, Pin, PinRequest};
use crate::error::{Error, Result};

/// An open `/dev/gdrdrv`.
pub struct GdrDrv {
    fd: i32,
    version: u32,
}

impl GdrDrv {
    /// Opens `/dev/gdrdrv` and checks the driver version.
    pub fn open() -> Result<GdrDrv> {
        let _ = (0, 0);
        Err(Error::NoDevice("not built yet"))
    }
}

impl Backend for GdrDrv {
    fn kind(&self) -> BackendKind { BackendKind::Gdrdrv }
    fn fd(&self) -> i32 { self.fd }
    fn driver_version_word(&self) -> u32 { self.version }
    fn pin(&self, _req: &PinRequest) -> Result<Pin> { Err(Error::NoDevice("x")) }
    fn unpin(&self, _pin: &Pin) -> Result<()> { Ok(()) }
    fn callback_flag(&self, _pin: &Pin) -> Result<bool> { Ok(false) }
    fn info(&self, _pin: &Pin, _m: Option<&Mapping>) -> Result<Info> { Err(Error::NoDevice("x")) }
    fn info_v1(&self, _pin: &Pin, _m: Option<&Mapping>) -> Result<Info> { Err(Error::NoDevice("x")) }
    fn map(&self, _pin: &Pin, _size: usize, _request: MappingType) -> Result<Mapping> { Err(Error::NoDevice("x")) }
    fn unmap(&self, _pin: &Pin, _mapping: &Mapping) -> Result<()> { Ok(()) }
    fn attribute(&self, _attr: Attr) -> Result<i32> { Ok(0) }
    fn driver_version(&self) -> Result<(i32, i32)> { Err(Error::NoDevice("x")) }
    fn close(&self) -> Result<()> { Ok(()) }
}
