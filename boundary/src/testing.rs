//! Panics on demand, for the tests that prove an entry's guard: a crate's tests arm the
//! switch for one entry, and [`entry!`](crate::entry) checks it first thing in the guarded
//! body, in that crate's test builds only (the check is behind `#[cfg(test)]` in the macro's
//! expansion, so a library built for use never reads it).

use std::cell::Cell;

thread_local! {
    /// The entry whose next call on this thread panics.
    static ARMED: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Makes the next call of the entry `name` on this thread panic inside its guard.
pub fn panic_next(name: &'static str) {
    ARMED.with(|a| a.set(Some(name)));
}

/// Panics if the switch is armed for `name`, disarming it; what [`entry!`](crate::entry)
/// calls in test builds.
#[doc(hidden)]
pub fn check(name: &str) {
    if ARMED.with(|a| a.get()) == Some(name) {
        ARMED.with(|a| a.set(None));
        panic!("{name}: panic asked for by the test (gdrapi_boundary::testing::panic_next)");
    }
}
