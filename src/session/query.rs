//! Queries on a handle (`gdr_get_info_v2`, the legacy `gdr_get_info`,
//! `gdr_get_callback_flag`) and the session's own queries (`gdr_get_attribute`,
//! `gdr_driver_get_version`).

use super::records::HandleRecord;
use super::state;
use super::{accept_handle, record, session};
use crate::backend::{Attr, Backend, BackendKind, Info, Pin};
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

/// What `ask` answers about the pin of the handle `mh` of the session `g`, once confirmed:
/// the handle still names that pin after the answer. An unpin moves the handle's state before
/// it asks the driver, and a record is reused only after 1024 later frees, so a query racing
/// an unpin describes its own buffer or fails with EINVAL, never another buffer.
fn query<T>(
    g: usize,
    mh: u64,
    ask: impl FnOnce(&dyn Backend, &HandleRecord, &Pin) -> Result<T>,
) -> Result<T> {
    let open = session(g)?;
    let h = record(mh)?;
    accept_handle(h, open.serial).map_err(|r| r.refuse(mh))?;
    let pin = h.pin();
    let answer = ask(&*open.backend, h, &pin);
    accept_handle(h, open.serial).map_err(|r| r.refuse(mh))?;
    if h.pin_handle.load(Ordering::Acquire) != pin.handle {
        gdr_err!("invalid gdr_mh_t 0x{:x}: unpinned during the query", mh);
        return Err(Error::InvalidHandle);
    }
    answer
}

/// `gdr_get_callback_flag`.
pub fn callback_flag(g: usize, mh: u64) -> Result<bool> {
    query(g, mh, |backend, _, pin| backend.callback_flag(pin))
}

/// `gdr_get_info_v2` (`legacy` = false) or the legacy v1 `gdr_get_info` (`legacy` = true):
/// what the driver reports for `mh`.
pub fn info(g: usize, mh: u64, legacy: bool) -> Result<Info> {
    query(g, mh, |backend, h, pin| {
        let m = (h.state.load(Ordering::Acquire) == state::MAPPED).then(|| h.mapping());
        if legacy {
            backend.info_v1(pin, m.as_ref())
        } else {
            backend.info(pin, m.as_ref())
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
