//! The panic boundary of every exported C function: the [`entry!`](crate::entry) macro, the
//! guard it installs ([`guard`], [`guard_or`]) and the value a caught panic returns
//! ([`OnPanic`], or the entry's own `on_panic` value).

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Defines one exported C function: `#[no_mangle] pub unsafe extern "C" fn`, its C name
/// written once (the body sees it as the constant `FUNC`, from `stringify!`), its body run
/// inside [`guard`](crate::guard), which turns a panic into a log line and the return type's
/// [`OnPanic`](crate::OnPanic) value. The doc comment gets the `# Safety` section every entry
/// shares.
///
/// `on_panic(VALUE) fn` names the failure value instead of the return type's [`OnPanic`]: for
/// return types that are aliases of `c_int` but report failure otherwise (a `CUresult`, a
/// `cudaError_t`, an `nvmlReturn_t`, a `VkResult`, -1 with `errno` set). `VALUE` is evaluated
/// only after a panic.
///
/// `unguarded fn` leaves the guard out: for entries whose accepted path cannot panic and must
/// not pay for the guard (the library's four copies); they enter it themselves on every other
/// path.
///
/// In the tests of the crate that defines them, guarded entries can be made to panic on
/// demand ([`testing::panic_next`](crate::testing::panic_next)); other builds have no such
/// check.
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
        on_panic($on_panic:expr)
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
            $crate::guard_or(FUNC, || $on_panic, move || {
                #[cfg(test)]
                $crate::testing::check(FUNC);
                $body
            })
        }
    };
    (
        $(#[$attr:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $crate::entry! {
            $(#[$attr])*
            on_panic($crate::OnPanic::on_panic())
            fn $name($($arg: $ty),*) $(-> $ret)? $body
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

impl<T> OnPanic for *const T {
    /// NULL.
    fn on_panic() -> Self {
        std::ptr::null()
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
    guard_or(name, R::on_panic, body)
}

/// Runs `body` for the C function `name`; if it panics, logs the panic and returns what
/// `on_panic` gives instead of unwinding into C (called only then, so it may set `errno`).
///
/// The same rule as [`guard`]'s holds for the caller's state.
#[inline(always)]
pub fn guard_or<R>(
    name: &'static str,
    on_panic: impl FnOnce() -> R,
    body: impl FnOnce() -> R,
) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            caught(name, payload);
            on_panic()
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
        let p = guard("test_fn", || -> *const u8 { panic!("boom") });
        assert!(p.is_null());
        guard("test_fn", || -> () { panic!("boom") });
        assert_eq!(guard("test_fn", || 7), 7);
    }

    #[test]
    fn a_panic_becomes_the_value_the_caller_names_and_only_then_is_it_made() {
        let made = std::cell::Cell::new(0);
        let fallback = || {
            made.set(made.get() + 1);
            999
        };
        assert_eq!(
            guard_or("test_fn", fallback, || -> c_int { panic!("boom") }),
            999
        );
        assert_eq!(made.get(), 1);
        assert_eq!(guard_or("test_fn", || unreachable!(), || 0), 0);
    }

    crate::entry! {
        /// A guarded entry with the return type's failure value.
        fn boundary_test_typed(v: c_int) -> c_int {
            v
        }
    }

    crate::entry! {
        /// A guarded entry with a failure value of its own.
        on_panic(-1)
        fn boundary_test_named(v: c_int) -> c_int {
            v
        }
    }

    #[test]
    fn entries_panic_on_demand_in_tests_and_return_their_failure_value() {
        // SAFETY: no pointer arguments.
        unsafe {
            assert_eq!(boundary_test_typed(3), 3);
            crate::testing::panic_next("boundary_test_typed");
            assert_eq!(boundary_test_typed(3), libc::EINVAL);
            assert_eq!(boundary_test_typed(3), 3, "the switch is spent");
            crate::testing::panic_next("boundary_test_named");
            assert_eq!(boundary_test_typed(4), 4, "another entry's switch");
            assert_eq!(boundary_test_named(4), -1);
            assert_eq!(boundary_test_named(4), 4);
        }
    }
}
