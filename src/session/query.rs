//! Queries on a handle (`gdr_get_info_v2`, the legacy `gdr_get_info`,
//! `gdr_get_callback_flag`) and the session's own queries (`gdr_get_attribute`,
//! `gdr_driver_get_version`).

use super::records::HandleRecord;
use super::state::{self, InUse};
use super::{accept_handle, record, session};
use crate::backend::{Attr, Backend, BackendKind, Info};
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

/// What `ask` answers about the handle `mh` of the session `g`, asked while the handle is
/// counted in its `users`: a query never answers about a buffer its handle no longer names,
/// since an unpin waits for the count to drop before it asks the driver.
fn query<T>(
    g: usize,
    mh: u64,
    ask: impl FnOnce(&dyn Backend, &HandleRecord) -> Result<T>,
) -> Result<T> {
    let open = session(g)?;
    // Counted before the state is read (see `Open::release`).
    let h = InUse::count(record(mh)?);
    accept_handle(&h, open.serial).map_err(|r| r.refuse(mh))?;
    ask(&*open.backend, &h)
}

/// `gdr_get_callback_flag`.
pub fn callback_flag(g: usize, mh: u64) -> Result<bool> {
    query(g, mh, |backend, h| backend.callback_flag(&h.pin()))
}

/// `gdr_get_info_v2` (`legacy` = false) or the legacy v1 `gdr_get_info` (`legacy` = true):
/// what the driver reports for `mh`.
pub fn info(g: usize, mh: u64, legacy: bool) -> Result<Info> {
    query(g, mh, |backend, h| {
        let m = (h.state.load(Ordering::Acquire) == state::MAPPED).then(|| h.mapping());
        if legacy {
            backend.info_v1(&h.pin(), m.as_ref())
        } else {
            backend.info(&h.pin(), m.as_ref())
        }
    })
}

/// `gdr_get_attribute`: the value of the `gdr_attr_t` `attr`.
pub fn attribute(g: usize, attr: u32) -> Result<i32> {
    let open = session(g)?;
    match Attr::from_raw(attr) {
        Some(Attr::UsingDmaBufMmap) => Ok(i32::from(open.backend.kind() == BackendKind::DmaBuf)),
        Some(a) => open.backend.attribute(a),
        None => {
            gdr_dbg!("undefined attribute");
            Err(Error::InvalidArgument("undefined attribute"))
        }
    }
}

/// `gdr_driver_get_version`: `(major, minor)` of the driver behind the session.
pub fn driver_version(g: usize) -> Result<(i32, i32)> {
    session(g)?.backend.driver_version()
}
