//! The panic boundary of every exported C function: the [`entry!`](crate::entry) macro, the
//! guard it installs ([`guard`]) and the value a caught panic returns ([`OnPanic`]).

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Defines one exported C function: `#[no_mangle] pub unsafe extern "C" fn`, its C name
/// written once (the body sees it as the constant `FUNC`, from `stringify!`), its body run
/// inside [`guard`](crate::guard), which turns a panic into a log line and the return type's
/// [`OnPanic`](crate::OnPanic) value. The doc comment gets the `# Safety` section every entry
/// shares.
///
/// `unguarded fn` leaves the guard out: for copy entries only, whose accepted path cannot
/// panic and must not pay for the guard; they enter it themselves on every other path.
#[macro_export]
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
            $crate::guard(FUNC, move || $body)
        }
    };
}

/// What a C entry returns when its body panicked: the failure value of its return type.
pub trait OnPanic {
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
/// The state of the library that calls it must stay consistent across a caught panic: both
/// libraries change shared records only through atomics and parking_lot locks, which do not
/// poison, and undo transient states with drop guards.
#[inline(always)]
pub fn guard<R: OnPanic>(name: &'static str, body: impl FnOnce() -> R) -> R {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_return_types_failure_value() {
        let v = guard("test_fn", || -> c_int { panic!("boom") });
        assert_eq!(v, libc::EINVAL);
        let p = guard("test_fn", || -> *mut u8 { panic!("boom") });
        assert!(p.is_null());
        guard("test_fn", || -> () { panic!("boom") });
        assert_eq!(guard("test_fn", || 7), 7);
    }
}
