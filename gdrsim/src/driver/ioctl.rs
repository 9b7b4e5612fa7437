//! The ioctls, behind the dispatcher's checks in gdrdrv's order.

use super::abi::*;
use super::{mr, mr_mut, Mr};
use crate::config::{self, Profile};
use crate::fail;
use crate::gpu::GPU_PAGE;
use crate::state::{pid, State};
use crate::uaccess;
use libc::{c_int, c_ulong, c_void};

/// Handles an ioctl on the emulated file `file` (found through `fd`).
pub fn ioctl(st: &mut State, file: u64, req: c_ulong, arg: *mut c_void) -> Result<c_int, c_int> {
    crate::counters::count_ioctl();
    if (req >> 8) & 0xff != IOCTL_TYPE {
        return Err(libc::EINVAL);
    }
    let owner = st.drv.files.get(&file).map(|f| f.pid).ok_or(libc::EIO)?;
    if owner != pid() {
        return Err(libc::EACCES);
    }
    let cfg = config::get();
    let (name, since) = request_info(req).ok_or(libc::ENOTTY)?;
    if cfg.driver_minor < since {
        return Err(libc::ENOTTY);
    }
    if let Some(e) = fail::check(name) {
        return Err(e);
    }
    match req {
        PIN_BUFFER => {
            let mut b = copy_in::<40>(arg)?;
            let tokens = u64_at(&b, 16) != 0 || u32_at(&b, 24) != 0;
            let h = pin(st, file, u64_at(&b, 0), u64_at(&b, 8), 0, tokens)?;
            put_u64(&mut b, 32, h);
            copy_out_or_unpin(st, file, h, arg, &b)
        }
        PIN_BUFFER_V2 => {
            let mut b = copy_in::<32>(arg)?;
            let flags = u32_at(&b, 16);
            if flags & !FLAG_FORCE_PCIE != 0 {
                return Err(libc::EINVAL);
            }
            let h = pin(st, file, u64_at(&b, 0), u64_at(&b, 8), flags, false)?;
            put_u64(&mut b, 24, h);
            copy_out_or_unpin(st, file, h, arg, &b)
        }
        UNPIN_BUFFER => {
            let b = copy_in::<8>(arg)?;
            unpin(st, file, u64_at(&b, 0))?;
            Ok(0)
        }
        GET_CB_FLAG => {
            let mut b = copy_in::<16>(arg)?;
            let m = mr(st, file, u64_at(&b, 0))?;
            put_u32(&mut b, 8, m.invalidated as u32);
            uaccess::write(arg as u64, &b)?;
            Ok(0)
        }
        GET_INFO | GET_INFO_V2 => {
            let mut b = copy_in::<48>(arg)?;
            let m = mr(st, file, u64_at(&b, 0))?;
            put_u64(&mut b, 8, m.va);
            put_u64(&mut b, 16, m.mapped_size);
            put_u32(&mut b, 24, GPU_PAGE as u32);
            put_u32(
                &mut b,
                28,
                if cfg!(target_arch = "x86_64") {
                    2_000_000
                } else {
                    0
                },
            );
            put_u64(&mut b, 32, m.tm_cycles);
            if req == GET_INFO {
                put_u32(&mut b, 40, (m.cur != MR_NONE) as u32);
                put_u32(&mut b, 44, (m.cur == MR_WC) as u32);
            } else {
                put_u32(&mut b, 40, m.cur);
            }
            uaccess::write(arg as u64, &b)?;
            Ok(0)
        }
        GET_ATTR => {
            let mut b = copy_in::<8>(arg)?;
            let persistent = cfg.persistent();
            let val = match u32_at(&b, 0) {
                1 => Some(persistent as u32),
                2 => Some(persistent as u32),
                _ => None,
            };
            if let Some(v) = val {
                put_u32(&mut b, 4, v);
            }
            uaccess::write(arg as u64, &b)?;
            val.map(|_| 0).ok_or(libc::EINVAL)
        }
        REQ_MAPPING_TYPE => {
            let b = copy_in::<16>(arg)?;
            let t = u32_at(&b, 8);
            if t > MR_DEVICE {
                return Err(libc::EINVAL);
            }
            let coherent = cfg.profile == Profile::Coherent;
            let m = mr_mut(st, file, u64_at(&b, 0))?;
            if m.map_addr.is_some() {
                return Err(libc::EBUSY);
            }
            let ok = match t {
                MR_NONE | MR_WC => true,
                MR_CACHING => coherent && !m.force_pcie && !m.invalidated,
                _ => false,
            };
            if !ok {
                return Err(libc::EOPNOTSUPP);
            }
            m.req = t;
            Ok(0)
        }
        GET_VERSION => {
            let mut b = [0u8; 8];
            put_u32(&mut b, 0, cfg.version_word());
            put_u32(&mut b, 4, MIN_API_VERSION);
            uaccess::write(arg as u64, &b)?;
            Ok(0)
        }
        _ => Err(libc::ENOTTY),
    }
}

fn copy_out_or_unpin(
    st: &mut State,
    file: u64,
    h: u64,
    arg: *mut c_void,
    b: &[u8],
) -> Result<c_int, c_int> {
    if let Err(e) = uaccess::write(arg as u64, b) {
        let _ = unpin(st, file, h);
        return Err(e);
    }
    Ok(0)
}

fn pin(
    st: &mut State,
    file: u64,
    addr: u64,
    size: u64,
    flags: u32,
    tokens: bool,
) -> Result<u64, c_int> {
    let t0 = tsc();
    let cfg = config::get();
    if addr == 0 {
        return Err(libc::EINVAL);
    }
    let force_pcie = flags & FLAG_FORCE_PCIE != 0;
    if cfg.persistent() {
        if tokens {
            return Err(libc::EINVAL);
        }
    } else if flags != 0 {
        return Err(libc::EINVAL);
    }
    let start = addr & !(GPU_PAGE - 1);
    let end = addr
        .checked_add(size)
        .and_then(|e| e.checked_add(GPU_PAGE - 1))
        .ok_or(libc::EINVAL)?
        & !(GPU_PAGE - 1);
    let mapped_size = end - start;
    if mapped_size == 0 {
        return Err(libc::EINVAL);
    }
    let gpu = st.gpu().ok_or(libc::EINVAL)?;
    if !gpu.pinnable(addr, start, mapped_size) {
        return Err(libc::EINVAL);
    }
    let segs = gpu.translate(start, mapped_size).ok_or(libc::EINVAL)?;
    let (memfd, gen) = (gpu.memfd, gpu.gen);
    // The pages must fit in what is left of BAR1 (GDRSIM_BAR1_SIZE).
    if !crate::bar1::fits(st.bar1_used(gen), mapped_size) {
        return Err(libc::ENOMEM);
    }
    let f = st.drv.files.get_mut(&file).ok_or(libc::EIO)?;
    let inc = (mapped_size >> page_shift()).max(1);
    if f.exhausted || f.next_handle + inc > HANDLE_LIMIT {
        f.exhausted = true;
        return Err(libc::ENOMEM);
    }
    let handle = f.next_handle;
    f.next_handle += inc;
    f.mrs.insert(
        handle,
        Mr {
            va: start,
            mapped_size,
            offset: addr & (GPU_PAGE - 1),
            segs,
            memfd,
            gen,
            force_pcie,
            req: MR_NONE,
            cur: MR_NONE,
            map_addr: None,
            invalidated: false,
            tm_cycles: tsc().wrapping_sub(t0),
        },
    );
    Ok(handle)
}

fn unpin(st: &mut State, file: u64, handle: u64) -> Result<(), c_int> {
    let m = st
        .drv
        .files
        .get_mut(&file)
        .and_then(|f| f.mrs.remove(&handle))
        .ok_or(libc::EINVAL)?;
    if let Some(a) = m.map_addr {
        let len = st.drv.vmas.get(&a).map_or(0, |v| v.len);
        st.zap(a, len);
    }
    st.reclaim();
    Ok(())
}
