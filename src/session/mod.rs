//! Sessions (`gdr_t`) and pinned-buffer records (`gdr_mh_t`): validation, bookkeeping and the
//! per-handle state machine, between the C entry points ([`crate::ffi`]) and a backend.
//!
//! A `gdr_t` is the address of a [`SessionRecord`]; a `gdr_mh_t.h` is the address of a
//! [`HandleRecord`]. Both live in [`Registry`] slabs, so every value C hands back is checked
//! ([`Registry::lookup`]) before it is read, and is then read only through atomics. The first
//! 48 bytes of a session record and the first 104 bytes of a handle record keep upstream's
//! `struct gdr` / `gdr_memh_t` layouts, which gdrcopy's own tests read.
//!
//! Concurrency: a session's backend sits behind a read-write lock that only `gdr_close`
//! takes for writing. The calls of the API's hot path take no lock: a pin holds the record
//! it reserved (see [`pin()`]); a map, an unmap or an unpin of a gdrdrv handle holds the
//! handle in its transient state (see [`state::hold`]); a query counts itself in the handle's
//! `users` (see [`query`]). `gdr_close`, which releases every record of its session before it
//! closes the descriptor, waits for each. A handle moves through the states of [`state`]
//! with compare-and-swap, so two threads cannot map, unmap or unpin the same handle at once.
//! Other calls (attributes, DMA-BUF handles, refusals) hold the lock shared. Copies take no
//! lock.
//!
//! Processes: a session names the process that opened it by its [`crate::process::token`],
//! which differs in every child however it was created, so a child is refused (EACCES) before
//! it reaches the driver or a lock; handle records live in wipe-on-fork memory, so in a child
//! every inherited handle reads as free and a copy through it is refused (EINVAL) by the
//! copy path's existing state check.
//!
//! Paths: map, unmap, unpin and the queries each have a quick path, lock-free, for a gdrdrv
//! handle of the session the call names, and a path through the session for every other
//! case; a copy has an inline check and a full one. Both paths of a call take what one
//! decision accepts, and word their refusals in one place ([`refuse`]).
//!
//! One file per concern: [`records`] (the two records and their layout), [`state`] (handle
//! states and the holds on a handle), [`lookup`] (finding the session and the handle a call
//! names), [`refuse`] (the decision on a handle, and what the decisions share),
//! [`open`](mod@open) (`gdr_open`, `gdr_close`, fork handlers), [`pin`](mod@pin),
//! [`map`](mod@map), [`unmap`](mod@unmap), [`unpin`](mod@unpin), [`query`] (queries,
//! attributes, versions) and [`copy`] (a copy's checks); each call's decision lives beside
//! it, each file's tests at its end, and what the tests share in `testing`.

mod copy;
mod lookup;
mod map;
mod open;
mod pin;
mod query;
mod records;
mod refuse;
pub mod state;
#[cfg(test)]
mod testing;
mod unmap;
mod unpin;

pub use copy::copy_target_accepted;
pub(crate) use copy::copy_target_refused;
pub use map::map;
pub use open::{close, open};
pub use pin::pin;
pub use query::{attribute, callback_flag, driver_version, info, info_v2_quick};
pub use records::{HandleRecord, SessionRecord};
pub use unmap::unmap;
#[cfg(test)]
pub use unpin::unpin;
pub use unpin::unpin_then;

use crate::registry::{Registry, WipedRegistry};

/// Every session record ever handed out.
static SESSIONS: Registry<SessionRecord> = Registry::new();
/// Every handle record ever handed out; all of them read as free in a child process, so that
/// a child's copy through an inherited handle is refused without a check on the copy path.
// SAFETY: a `HandleRecord` is atomic integers only, and all of them are 0 in its free state
// (`state::FREE`; see `HandleRecord::new_free`).
static HANDLES: WipedRegistry<HandleRecord> = unsafe { WipedRegistry::wiped_in_children() };
