//! DMA-BUF export of device memory.

use super::*;

/// `cuMemGetHandleForAddressRange`: exports `[dptr, dptr + size)` as a dma-buf fd (an fd of
/// the VRAM file whose mmap the emulator translates to the exported range).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemGetHandleForAddressRange`: `handle` is NULL or writable for
/// the handle `handle_type` names (an `int` fd for a dma-buf).
#[no_mangle]
pub unsafe extern "C" fn cuMemGetHandleForAddressRange(
    handle: *mut c_void,
    dptr: CUdeviceptr,
    size: size_t,
    handle_type: c_int,
    flags: c_ulonglong,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemGetHandleForAddressRange(handle: *mut c_void, dptr: CUdeviceptr, size: size_t, handle_type: c_int, flags: c_ulonglong));
    entry("cuMemGetHandleForAddressRange", || {
        let mut st = STATE.lock();
        let g = st.gpu().ok_or(cu::NOT_INITIALIZED)?;
        if !config::get().dmabuf {
            return Err(cu::NOT_SUPPORTED);
        }
        let page = 1u64 << crate::driver::page_shift();
        let size = size as u64;
        if handle.is_null()
            || handle_type != 1
            || flags & !1 != 0
            || size == 0
            || !dptr.is_multiple_of(page)
            || !size.is_multiple_of(page)
        {
            return Err(cu::INVALID_VALUE);
        }
        if !g.in_live_allocation(dptr) {
            return Err(cu::INVALID_VALUE);
        }
        let segs = g.translate(dptr, size).ok_or(cu::INVALID_VALUE)?;
        let (memfd, gen) = (g.memfd, g.gen);
        // The export must fit in what is left of BAR1 (GDRSIM_BAR1_SIZE).
        if !crate::bar1::fits(st.bar1_used(gen), size) {
            return Err(cu::OUT_OF_MEMORY);
        }
        // SAFETY: F_DUPFD_CLOEXEC on our own VRAM memfd.
        let fd = unsafe { libc::fcntl(memfd, libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            return Err(cu::OUT_OF_MEMORY);
        }
        let ino = crate::driver::inode_of(fd).unwrap_or(0);
        st.dmabufs.insert(
            fd,
            Dmabuf {
                segs,
                size,
                memfd,
                gen,
                pid: pid(),
                ino,
            },
        );
        set_kind(fd, KIND_DMABUF);
        out(handle.cast::<c_int>(), fd)
    })
}
