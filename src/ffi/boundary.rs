//! The C boundary: the [`entry!`] macro every exported function is written with and the
//! panic guard it installs (both from `gdrapi-boundary`, shared with `libgdrapi_ext.so.0`),
//! the C status of a result ([`status`]) and the checked C output pointer ([`Out`]).

use crate::error::Result;
pub(crate) use gdrapi_boundary::{entry, guard};
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::ptr::NonNull;

/// The C return value of a result: 0, or the positive errno value.
pub(crate) fn status(r: Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            crate::hint::cold_path();
            e.errno()
        }
    }
}

/// Logs that the argument `arg` of `func` is NULL and returns EINVAL.
#[cold]
#[inline(never)]
pub(crate) fn null_arg(func: &str, arg: &str) -> c_int {
    gdr_err!("{}: {} is NULL", func, arg);
    libc::EINVAL
}

/// A C output pointer known to be non-NULL and, by the contract of its constructor, valid
/// for reads and writes of `T` while the `Out` lives: writing through it is safe.
pub(crate) struct Out<'a, T> {
    ptr: NonNull<T>,
    _caller: PhantomData<&'a mut T>,
}

impl<'a, T> Out<'a, T> {
    /// `p` as an `Out`, or `None` when it is NULL.
    ///
    /// # Safety
    /// `p` is NULL or valid for reads and writes of `T` (any content) for `'a`.
    pub(crate) unsafe fn new(p: *mut T) -> Option<Out<'a, T>> {
        NonNull::new(p).map(|ptr| Out {
            ptr,
            _caller: PhantomData,
        })
    }

    /// Stores `v`.
    pub(crate) fn write(&mut self, v: T) {
        // SAFETY: `ptr` is valid for writes of `T` (the constructor's contract).
        unsafe { self.ptr.as_ptr().write(v) }
    }

    /// Stores the value of `r` when it is `Ok`; returns 0 or the error's errno.
    pub(crate) fn fill(mut self, r: Result<T>) -> c_int {
        match r {
            Ok(v) => {
                self.write(v);
                0
            }
            Err(e) => e.errno(),
        }
    }

    /// The pointer, valid for reads and writes of `T` while `self` lives.
    pub(crate) fn as_ptr(&mut self) -> *mut T {
        self.ptr.as_ptr()
    }
}

/// The output argument `p` (named `arg`) of the C function `func` as an [`Out`], or EINVAL
/// with a log line when it is NULL.
///
/// # Safety
/// As [`Out::new`].
pub(crate) unsafe fn out<'a, T>(
    func: &str,
    p: *mut T,
    arg: &str,
) -> std::result::Result<Out<'a, T>, c_int> {
    // SAFETY: the caller's contract.
    unsafe { Out::new(p) }.ok_or_else(|| null_arg(func, arg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn status_is_zero_or_errno() {
        assert_eq!(status(Ok(())), 0);
        assert_eq!(status(Err(Error::AlreadyMapped)), libc::EAGAIN);
    }

    #[test]
    fn out_refuses_null_and_fills_only_on_success() {
        // SAFETY: NULL is allowed.
        let null = unsafe { out::<c_int>("test_fn", std::ptr::null_mut(), "v") };
        assert_eq!(null.err(), Some(libc::EINVAL));
        let mut v: c_int = 5;
        // SAFETY: `v` is a live, writable int.
        let o = unsafe { out("test_fn", &mut v, "v") }.unwrap();
        assert_eq!(o.fill(Err(Error::NotMapped)), libc::EINVAL);
        assert_eq!(v, 5);
        // SAFETY: as above.
        let o = unsafe { out("test_fn", &mut v, "v") }.unwrap();
        assert_eq!(o.fill(Ok(9)), 0);
        assert_eq!(v, 9);
    }
}
