//! The panic boundary every C entry point goes through, and the helpers that turn results
//! into C return values.

use crate::error::Result;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `body` for the C function `name`; if it panics, logs the panic and returns
/// `on_panic` instead of unwinding into C.
///
/// Zero-cost when nothing panics: `body` is inlined and `catch_unwind` only adds an unwind
/// table entry (a landing pad), no instruction on the path that returns normally.
#[inline(always)]
pub(crate) fn entry<T>(name: &'static str, on_panic: T, body: impl FnOnce() -> T) -> T {
    // The library's state stays consistent across a caught panic: records are only changed
    // through atomics and parking_lot locks, which do not poison.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            caught(name, payload);
            on_panic
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
pub(crate) fn status(r: Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

/// Logs a NULL output pointer of `func` and returns EINVAL.
#[cold]
#[inline(never)]
pub(crate) fn null_arg(func: &str, arg: &str) -> i32 {
    gdr_err!("{}: {} is NULL", func, arg);
    libc::EINVAL
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn a_panic_becomes_the_fallback_value() {
        let v = entry("test_fn", libc::EINVAL, || -> i32 { panic!("boom") });
        assert_eq!(v, libc::EINVAL);
        assert_eq!(entry("test_fn", -1, || 7), 7);
    }

    #[test]
    fn status_is_zero_or_errno() {
        assert_eq!(status(Ok(())), 0);
        assert_eq!(status(Err(Error::AlreadyMapped)), libc::EAGAIN);
    }
}
