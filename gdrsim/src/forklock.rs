//! A mutex that a forked child can reset: its whole state is one futex word, so the child,
//! where the parent's other threads no longer exist, can put it back to "unlocked, no waiters"
//! however many of them were waiting at the moment of `fork`. (parking_lot keeps waiters in a
//! process-wide queue and may hand the lock to one of them on unlock, which in a child is a
//! thread that does not exist: the child then waits for ever.)

use parking_lot::lock_api::{self, RawMutex as _};
use std::sync::atomic::{AtomicU32, Ordering};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
/// Locked, and some thread may be asleep in `futex_wait` on the word.
const CONTENDED: u32 = 2;

/// The raw lock: a futex word that is [`UNLOCKED`], [`LOCKED`] or [`CONTENDED`].
pub struct RawForkLock {
    state: AtomicU32,
}

/// A mutex made of [`RawForkLock`], used like `parking_lot::Mutex`.
pub type Mutex<T> = lock_api::Mutex<RawForkLock, T>;

// SAFETY: `lock` returns only after swapping the word from UNLOCKED to LOCKED or CONTENDED
// with acquire ordering, so at most one holder exists at a time; `unlock` releases with
// release ordering and wakes a sleeper whenever one may exist (the word was CONTENDED).
unsafe impl lock_api::RawMutex for RawForkLock {
    const INIT: Self = RawForkLock {
        state: AtomicU32::new(UNLOCKED),
    };
    type GuardMarker = lock_api::GuardNoSend;

    fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    fn try_lock(&self) -> bool {
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// # Safety
    ///
    /// The calling thread holds the lock (`lock_api`'s contract).
    unsafe fn unlock(&self) {
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            self.wake_one();
        }
    }
}

impl RawForkLock {
    #[cold]
    fn lock_contended(&self) {
        for _ in 0..100 {
            if self.state.load(Ordering::Relaxed) == UNLOCKED && self.try_lock() {
                return;
            }
            std::hint::spin_loop();
        }
        // From here on the word says CONTENDED while we hold it: the unlock that follows wakes
        // the next sleeper, if any (at worst one needless wake-up).
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            self.wait_while_contended();
        }
    }

    fn wait_while_contended(&self) {
        // SAFETY: FUTEX_WAIT on a live, aligned u32 of this process with a null timeout; it
        // returns at once if the word no longer holds CONTENDED, and EINTR or a spurious wake-up
        // only sends us round the caller's loop again.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.state.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                CONTENDED,
                std::ptr::null::<libc::timespec>(),
            )
        };
    }

    fn wake_one(&self) {
        // SAFETY: FUTEX_WAKE on a live, aligned u32 of this process; it only wakes waiters.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.state.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            )
        };
    }
}

/// Puts `m` back to unlocked with no waiters, whoever held or awaited it; for the child side
/// of a fork handler only.
///
/// # Safety
/// The calling process must have a single thread (a child just after `fork`), and the data
/// must be consistent: either the forking thread held the lock across the fork (fork handlers)
/// or no holder was changing the data at the moment of `fork`.
pub unsafe fn reset_in_child<T>(m: &Mutex<T>) {
    // SAFETY: `raw` is unsafe only because the raw lock could be unlocked behind a guard's back;
    // the caller guarantees no other thread exists, and this thread holds no guard it still uses.
    let raw = unsafe { m.raw() };
    raw.state.store(UNLOCKED, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn excludes_under_contention() {
        let m = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = m.lock();
                        // A non-atomic read-modify-write with a yield in between: lost updates
                        // show if two threads were ever inside together.
                        let v = *g;
                        if v % 1000 == 0 {
                            std::thread::yield_now();
                        }
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread panicked");
        }
        assert_eq!(*m.lock(), 80_000);
        assert!(m.try_lock().is_some());
    }

    /// Forks while this thread holds the lock and other threads sleep waiting for it (what
    /// fork handlers see); the child resets the lock and must then take it at once.
    #[test]
    fn child_resets_a_lock_that_had_waiters() {
        static M: Mutex<u32> = Mutex::new(7);
        let held = M.lock();
        let waiters: Vec<_> = (0..3)
            .map(|_| std::thread::spawn(|| *M.lock() += 1))
            .collect();
        // Let the waiters get to sleep on the word.
        while M.raw_state() != CONTENDED {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: fork in a test; the child runs only atomics, futex calls, alarm and _exit.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            // SAFETY: single-threaded child; alarm ends a hang instead of the test waiting.
            unsafe {
                libc::alarm(5);
                reset_in_child(&M);
            }
            let ok = match M.try_lock() {
                Some(g) => *g == 7,
                None => false,
            };
            let again = {
                let g = M.lock();
                *g == 7
            };
            // SAFETY: leaving the child without running the parent's exit handlers.
            unsafe { libc::_exit(if ok && again { 0 } else { 1 }) };
        }
        std::mem::forget(held);
        // SAFETY: this thread holds the lock (guard forgotten just above).
        unsafe { M.force_unlock() };
        for w in waiters {
            w.join().expect("waiter panicked");
        }
        assert_eq!(*M.lock(), 10);
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child status {status:#x}"
        );
    }

    trait RawState {
        fn raw_state(&self) -> u32;
    }
    impl<T> RawState for Mutex<T> {
        fn raw_state(&self) -> u32 {
            // SAFETY: only reads the word.
            unsafe { self.raw() }.state.load(Ordering::Relaxed)
        }
    }
}
