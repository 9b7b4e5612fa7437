//! Which process is calling: a token that differs in every child process, read without a
//! system call.
//!
//! A `gdr_t` belongs to the process that opened it; a child created by `fork`, glibc's
//! `_Fork` or a raw `clone` system call must be told apart from its parent on every call
//! without a `getpid` per call (the copies need no token: the handle records themselves are
//! wiped in a child, see [`crate::registry`]). The token
//! lives in a page marked `MADV_WIPEONFORK` ([`sys::wipe_on_fork_word`]), which the kernel
//! zero-fills in every child whatever created it (the technique of OpenSSL's and
//! BoringSSL's fork-safe random generators). A zero token is replaced by a fresh one on the
//! next call. Where the kernel lacks the advice, the word is an ordinary static that a
//! `pthread_atfork` child handler clears instead; children made without fork handlers are
//! then not recognised.

use crate::sys;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The word holding this process's token: the wipe-on-fork page, or [`FALLBACK`].
static WORD: OnceLock<&'static AtomicU64> = OnceLock::new();
/// The token word where `MADV_WIPEONFORK` is not available.
static FALLBACK: AtomicU64 = AtomicU64::new(0);
/// The last token handed out in this process or its ancestors (inherited by a child, so a
/// child's token always exceeds every token its inherited records can hold).
static LAST: AtomicU64 = AtomicU64::new(0);

fn word() -> &'static AtomicU64 {
    WORD.get_or_init(|| match sys::wipe_on_fork_word() {
        Ok(w) => w,
        Err(e) => {
            gdr_warn!(
                "MADV_WIPEONFORK is not available ({}): a child process made without fork handlers \
                 (a raw clone system call) is not told apart from its parent",
                e
            );
            &FALLBACK
        }
    })
}

/// This process's token (never 0): the same for every thread, different in every child.
pub fn token() -> u64 {
    let w = word();
    match w.load(Ordering::Acquire) {
        0 => fresh(w),
        t => t,
    }
}

/// This process's token if it already has one, else 0 (never initialises anything).
pub fn token_if_known() -> u64 {
    WORD.get().map_or(0, |w| w.load(Ordering::Relaxed))
}

#[cold]
fn fresh(w: &AtomicU64) -> u64 {
    let t = LAST.fetch_add(1, Ordering::Relaxed) + 1;
    match w.compare_exchange(0, t, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => t,
        // Another thread of this process got there first.
        Err(current) => current,
    }
}

/// For the `pthread_atfork` child handler: forgets the token where the page cannot do it.
pub fn forget_after_fork() {
    FALLBACK.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::child;

    #[test]
    fn token_is_stable_and_non_zero() {
        let t = token();
        assert_ne!(t, 0);
        assert_eq!(token(), t);
        assert_eq!(token_if_known(), t);
        let other = std::thread::spawn(token).join().unwrap();
        assert_eq!(other, t, "one token for every thread");
    }

    #[test]
    fn a_child_made_without_fork_handlers_gets_another_token() {
        let parent = token();
        child::assert_passes(child::Made::RawClone, || {
            let known = token_if_known();
            let own = token();
            known == 0 && own != parent && own != 0 && token() == own
        });
        assert_eq!(token(), parent);
    }
}
