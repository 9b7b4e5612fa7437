//! The ioctls, behind the dispatcher's checks in gdrdrv's order.

use super::params::{copy_in, copy_out, page_shift, tsc, Params, HANDLE_LIMIT};
use super::{mr, mr_mut, Mr};
use crate::config::{self, Profile};
use crate::fail;
use crate::gpu::GPU_PAGE;
use crate::state::{pid, State};
use gdrapi_abi::gdrdrv::{
    self, ioc, AttrParams, CbFlagParams, InfoParams, InfoV2Params, PinParams, PinV2Params,
    ReqMappingTypeParams, UnpinParams, VersionParams, ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE,
    ATTR_USE_PERSISTENT_MAPPING, MR_CACHING, MR_DEVICE, MR_NONE, MR_WC, PIN_FLAG_FORCE_PCIE,
};
use libc::{c_int, c_ulong, c_void};

/// Handles an ioctl on the emulated file `file` (found through `fd`).
pub fn ioctl(st: &mut State, file: u64, req: c_ulong, arg: *mut c_void) -> Result<c_int, c_int> {
    crate::counters::count_ioctl();
    if (req >> 8) & 0xff != super::IOCTL_TYPE {
        return Err(libc::EINVAL);
    }
    let owner = st.drv.files.get(&file).map(|f| f.pid).ok_or(libc::EIO)?;
    if owner != pid() {
        return Err(libc::EACCES);
    }
    let cfg = config::get();
    let request = gdrdrv::request(req).ok_or(libc::ENOTTY)?;
    if cfg.version_word() < request.since {
        return Err(libc::ENOTTY);
    }
    if let Some(e) = fail::check(request.name) {
        return Err(e);
    }
    match req {
        ioc::PIN_BUFFER => {
            let mut p: PinParams = copy_in(arg)?;
            let tokens = p.p2p_token != 0 || p.va_space != 0;
            p.handle = pin(st, file, p.addr, p.size, 0, tokens)?;
            copy_out_or_unpin(st, file, p.handle, arg, p)
        }
        ioc::PIN_BUFFER_V2 => {
            let mut p: PinV2Params = copy_in(arg)?;
            if p.flags & !PIN_FLAG_FORCE_PCIE != 0 {
                return Err(libc::EINVAL);
            }
            p.handle = pin(st, file, p.addr, p.size, p.flags, false)?;
            copy_out_or_unpin(st, file, p.handle, arg, p)
        }
        ioc::UNPIN_BUFFER => {
            let p: UnpinParams = copy_in(arg)?;
            unpin(st, file, p.handle)?;
            Ok(0)
        }
        ioc::GET_CB_FLAG => {
            let mut p: CbFlagParams = copy_in(arg)?;
            p.flag = mr(st, file, p.handle)?.invalidated as u32;
            copy_out(arg, p)?;
            Ok(0)
        }
        ioc::GET_INFO => {
            let mut p: InfoParams = copy_in(arg)?;
            let m = mr(st, file, p.handle)?;
            (p.va, p.mapped_size, p.tm_cycles) = (m.va, m.mapped_size, m.tm_cycles);
            (p.page_size, p.tsc_khz) = (GPU_PAGE as u32, TSC_KHZ);
            p.mapped = (m.cur != MR_NONE) as u32;
            p.wc_mapping = (m.cur == MR_WC) as u32;
            copy_out(arg, p)?;
            Ok(0)
        }
        ioc::GET_INFO_V2 => {
            let mut p: InfoV2Params = copy_in(arg)?;
            let m = mr(st, file, p.handle)?;
            (p.va, p.mapped_size, p.tm_cycles) = (m.va, m.mapped_size, m.tm_cycles);
            (p.page_size, p.tsc_khz) = (GPU_PAGE as u32, TSC_KHZ);
            p.mapping_type = m.cur;
            copy_out(arg, p)?;
            Ok(0)
        }
        ioc::GET_ATTR => {
            let mut p: AttrParams = copy_in(arg)?;
            let persistent = cfg.persistent();
            let val = match p.attr {
                ATTR_USE_PERSISTENT_MAPPING | ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE => {
                    Some(persistent as u32)
                }
                _ => None,
            };
            if let Some(v) = val {
                p.val = v;
            }
            copy_out(arg, p)?;
            val.map(|_| 0).ok_or(libc::EINVAL)
        }
        ioc::REQ_MAPPING_TYPE => {
            let p: ReqMappingTypeParams = copy_in(arg)?;
            let t = p.mapping_type;
            if t > MR_DEVICE {
                return Err(libc::EINVAL);
            }
            let coherent = cfg.profile == Profile::Coherent;
            let m = mr_mut(st, file, p.handle)?;
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
        ioc::GET_VERSION => {
            let p = VersionParams {
                gdrdrv_version: cfg.version_word(),
                minimum_gdr_api_version: gdrdrv::MINIMUM_GDR_API_VERSION,
            };
            copy_out(arg, p)?;
            Ok(0)
        }
        _ => Err(libc::ENOTTY),
    }
}

/// `tsc_khz` of the info requests: the TSC's frequency on x86, 0 elsewhere (as the driver).
const TSC_KHZ: u32 = if cfg!(target_arch = "x86_64") {
    2_000_000
} else {
    0
};

fn copy_out_or_unpin<T: Params>(
    st: &mut State,
    file: u64,
    h: u64,
    arg: *mut c_void,
    p: T,
) -> Result<c_int, c_int> {
    if let Err(e) = copy_out(arg, p) {
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
    let force_pcie = flags & PIN_FLAG_FORCE_PCIE != 0;
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
