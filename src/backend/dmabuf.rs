//! DMA-BUF backend: pins by exporting a dma-buf with `cuMemGetHandleForAddressRange` and maps
//! it with mmap, without the kernel module. libcuda is loaded at run time only.

use super::{Attr, Backend, BackendKind, Info, Mapping, MappingType, Pin, PinRequest};
use crate::error::{Error, Result};

/// The DMA-BUF backend of one session.
pub struct DmaBuf {
    _private: (),
}

impl DmaBuf {
    /// Loads libcuda and checks that some device supports dma-buf mmap.
    pub fn open() -> Result<DmaBuf> {
        Err(Error::NotSupported("DMA-BUF backend not built yet"))
    }
}

impl Backend for DmaBuf {
    fn kind(&self) -> BackendKind {
        BackendKind::DmaBuf
    }
    fn fd(&self) -> i32 {
        -1
    }
    fn driver_version_word(&self) -> u32 {
        0
    }
    fn pin(&self, _req: &PinRequest) -> Result<Pin> {
        Err(Error::NotSupported("dmabuf"))
    }
    fn unpin(&self, _pin: &Pin) -> Result<()> {
        Ok(())
    }
    fn callback_flag(&self, _pin: &Pin) -> Result<bool> {
        Ok(false)
    }
    fn info(&self, _pin: &Pin, _m: Option<&Mapping>) -> Result<Info> {
        Err(Error::NotSupported("dmabuf"))
    }
    fn info_v1(&self, _pin: &Pin, _m: Option<&Mapping>) -> Result<Info> {
        Err(Error::NotSupported("dmabuf"))
    }
    fn map(&self, _pin: &Pin, _size: usize, _request: MappingType) -> Result<Mapping> {
        Err(Error::NotSupported("dmabuf"))
    }
    fn unmap(&self, _pin: &Pin, _mapping: &Mapping) -> Result<()> {
        Ok(())
    }
    fn attribute(&self, _attr: Attr) -> Result<i32> {
        Ok(1)
    }
    fn driver_version(&self) -> Result<(i32, i32)> {
        Err(Error::NotSupported("dmabuf"))
    }
    fn close(&self) -> Result<()> {
        Ok(())
    }
}
