//! The C boundary: the [`entry!`] macro every exported function is written with, the panic
//! guard it installs, the value a caught panic returns ([`OnPanic`]), and the checked C output
//! pointer ([`Out`]).

use crate::error::Result;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

/// Defines one exported C function: `#[no_mangle] pub unsafe extern "C" fn`, its C name
/// written once (the body sees it as the constant `FUNC`, from `stringify!`), its body run
/// inside [`guard`], which turns a panic into a log line and the return type's [`OnPanic`]
/// value. The doc comment gets the `# Safety` section every entry shares.
///
/// `unguarded fn` leaves the guard out: for the copy entries only, whose accepted path
/// cannot panic and must not pay for the guard; they enter it themselves on every other path.
macro_rules! entry {
    (
        $(#[$attr:meta])*
        unguarded fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $(#[$attr])*
        ///
        /// # Safety
        /// Every pointer argument is NULL or valid for the access the C API documents.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            /// This entry's C name, for log lines.
            const FUNC: &str = stringify!($name);
            $body
        }
    };
    (
        $(#[$attr:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $(#[$attr])*
        ///
        /// # Safety
        /// Every pointer argument is NULL or valid for the access the C API documents.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            /// This entry's C name, for log lines.
            const FUNC: &str = stringify!($name);
            $crate::ffi::boundary::guard(FUNC, move || $body)
        }
    };
}
pub(crate) use entry;

/// What a C entry returns when its body panicked: the failure value of its return type.
pub(crate) trait OnPanic {
    /// The failure value.
    fn on_panic() -> Self;
}

impl OnPanic for c_int {
    /// EINVAL, as upstream answers a call it cannot serve.
    fn on_panic() -> Self {
        libc::EINVAL
    }
}

impl<T> OnPanic for *mut T {
    /// NULL (`gdr_open`'s failure).
    fn on_panic() -> Self {
        std::ptr::null_mut()
    }
}

impl OnPanic for () {
    fn on_panic() -> Self {}
}

/// Runs `body` for the C function `name`; if it panics, logs the panic and returns the
/// [`OnPanic`] value instead of unwinding into C.
///
/// The library's state stays consistent across a caught panic: records are only changed
/// through atomics and parking_lot locks, which do not poison, and every transient handle
/// state is undone by a drop guard.
#[inline(always)]
pub(crate) fn guard<R: OnPanic>(name: &'static str, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            caught(name, payload);
            R::on_panic()
        }
    }
}

/// Logs a panic caught at the boundary of the C function `name`.
#[cold]
#[inline(never)]
fn caught(name: &'static str, payload: Box<dyn std::any::Any + Send>) {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    gdr_err!("internal error in {}: {}; the call failed", name, msg);
}

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
    fn a_panic_becomes_the_return_types_failure_value() {
        let v = guard("test_fn", || -> c_int { panic!("boom") });
        assert_eq!(v, libc::EINVAL);
        let p = guard("test_fn", || -> *mut u8 { panic!("boom") });
        assert!(p.is_null());
        guard("test_fn", || -> () { panic!("boom") });
        assert_eq!(guard("test_fn", || 7), 7);
    }

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
