//! Copying ioctl parameter structs from and to the caller's memory with the kernel's
//! semantics: a bad pointer gives EFAULT instead of a crash.

use libc::{c_int, c_void, iovec};
use std::sync::atomic::{AtomicBool, Ordering};

static NO_VM_CALLS: AtomicBool = AtomicBool::new(false);

fn vm_copy(addr: u64, buf: *mut u8, len: usize, write: bool) -> Result<(), c_int> {
    if addr == 0 || addr < 4096 {
        return Err(libc::EFAULT);
    }
    if !NO_VM_CALLS.load(Ordering::Relaxed) {
        let local = iovec {
            iov_base: buf.cast::<c_void>(),
            iov_len: len,
        };
        let remote = iovec {
            iov_base: addr as *mut c_void,
            iov_len: len,
        };
        // SAFETY: `local` is a buffer we own of `len` bytes; the kernel checks `remote` and
        // reports a bad address as EFAULT instead of faulting.
        let n = unsafe {
            let pid = libc::getpid();
            if write {
                libc::process_vm_writev(pid, &local, 1, &remote, 1, 0)
            } else {
                libc::process_vm_readv(pid, &local, 1, &remote, 1, 0)
            }
        };
        if n == len as isize {
            return Ok(());
        }
        let e = crate::real::errno();
        if n >= 0 || e == libc::EFAULT {
            return Err(libc::EFAULT);
        }
        // ENOSYS/EPERM: the calls are filtered here; fall back to plain copies.
        NO_VM_CALLS.store(true, Ordering::Relaxed);
    }
    // SAFETY: fallback when the kernel cannot check for us: the caller promised (by passing
    // it to ioctl) that `addr` points to a parameter struct of this size.
    unsafe {
        if write {
            std::ptr::copy_nonoverlapping(buf, addr as *mut u8, len);
        } else {
            std::ptr::copy_nonoverlapping(addr as *const u8, buf, len);
        }
    }
    Ok(())
}

/// Reads `out.len()` bytes from the caller's address `addr`.
pub fn read(addr: u64, out: &mut [u8]) -> Result<(), c_int> {
    vm_copy(addr, out.as_mut_ptr(), out.len(), false)
}

/// Writes `data` to the caller's address `addr`.
pub fn write(addr: u64, data: &[u8]) -> Result<(), c_int> {
    vm_copy(addr, data.as_ptr() as *mut u8, data.len(), true)
}
