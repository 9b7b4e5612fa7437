//! Correctness through a second view of the same memory: bytes a [`Copier`] writes through the
//! BAR mapping (or into CUDA host memory) must appear, exactly and nowhere else, when read
//! another way (CUDA's `cuMemcpyDtoH`, or a second CPU mapping of the re-imported fd), and the
//! reverse.

use crate::copiers::Copier;
use crate::cuda::{HostMemory, Imported};
use crate::error::{Error, Result};
use crate::pattern;

/// Another way to read and write the bytes of one allocation.
pub trait View {
    /// What this view is, for messages.
    fn describe(&self) -> String;
    /// Reads `dst.len()` bytes at `offset`; complete when it returns.
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// Writes `src` at `offset`; visible through every mapping when it returns.
    fn write(&self, offset: usize, src: &[u8]) -> Result<()>;
}

impl View for Imported<'_> {
    fn describe(&self) -> String {
        "CUDA (cuMemcpyDtoH/HtoD on the imported fd)".into()
    }
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        Imported::read(self, offset, dst)
    }
    fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        Imported::write(self, offset, src)
    }
}

impl View for HostMemory<'_> {
    fn describe(&self) -> String {
        "CUDA (cuMemcpyDtoH/HtoD on the cuMemHostGetDevicePointer pointer)".into()
    }
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        HostMemory::read(self, offset, dst)
    }
    fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        HostMemory::write(self, offset, src)
    }
}

/// A CPU mapping of the same memory (for example the fd imported again into Vulkan).
pub struct CpuView {
    ptr: *mut u8,
    len: usize,
}

impl CpuView {
    /// A view of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay a readable and writable mapping while the view is used.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> CpuView {
        CpuView { ptr, len }
    }

    fn range(&self, offset: usize, n: usize) -> Result<()> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::Invalid(format!(
                "range {offset}+{n} past {} bytes",
                self.len
            ))),
        }
    }
}

impl View for CpuView {
    fn describe(&self) -> String {
        format!("second CPU mapping at {:p}", self.ptr)
    }
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.range(offset, dst.len())?;
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: in range (checked above) of a live mapping (constructor contract).
            *d = unsafe { self.ptr.add(offset + i).read_volatile() };
        }
        Ok(())
    }
    fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.range(offset, src.len())?;
        for (i, &s) in src.iter().enumerate() {
            // SAFETY: as in `read`.
            unsafe { self.ptr.add(offset + i).write_volatile(s) };
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

fn mismatch(what: String, got: &[u8], want: &[u8]) -> Result<()> {
    match pattern::first_diff(got, want) {
        None => Ok(()),
        Some(i) => Err(Error::Mismatch {
            what,
            offset: i,
            expected: want[i],
            found: got[i],
        }),
    }
}

/// Checks one copy of `n` bytes at offset `off` of the mapping `dev` in both directions against
/// `view`, including that no byte around the range changes. `seed` varies the data.
///
/// # Safety
/// `dev..dev+len` must be a live mapping of the memory `view` sees, with nothing else using it.
pub unsafe fn check_one(
    c: &dyn Copier,
    dev: *mut u8,
    len: usize,
    view: &dyn View,
    off: usize,
    n: usize,
    seed: u64,
) -> Result<()> {
    let window = (off + n + 64).next_multiple_of(64);
    if window > len {
        return Err(Error::Invalid(format!(
            "check of {n} bytes at {off} past {len}"
        )));
    }
    // To the mapping.
    if c.supports(true, dev as usize + off, n) {
        let background = pattern::bytes(window, seed);
        view.write(0, &background)?;
        let src = pattern::bytes(n, seed ^ 0x5555);
        // SAFETY: off+n < window <= len bytes of the live mapping; `src` holds n bytes.
        unsafe { c.to_mapping(dev.add(off), src.as_ptr(), n) };
        let mut got = vec![0u8; window];
        view.read(0, &mut got)?;
        let mut want = background;
        want[off..off + n].copy_from_slice(&src);
        mismatch(
            format!("{} to_mapping of {n} bytes at offset {off}", c.name()),
            &got,
            &want,
        )?;
    }
    // From the mapping, with guard bytes on both sides of the host range.
    if c.supports(false, dev as usize + off, n) {
        let data = pattern::bytes(window, seed ^ 0xAAAA);
        view.write(0, &data)?;
        let mut host = vec![0xA5u8; n + 64];
        // SAFETY: as above; `host[32..32+n]` is writable.
        unsafe { c.from_mapping(host.as_mut_ptr().add(32), dev.add(off), n) };
        let mut want = vec![0xA5u8; n + 64];
        want[32..32 + n].copy_from_slice(&data[off..off + n]);
        mismatch(
            format!("{} from_mapping of {n} bytes at offset {off}", c.name()),
            &host,
            &want,
        )?;
    }
    Ok(())
}

/// Runs [`check_one`] over every mapping offset in `offsets` and length in `lengths`; returns
/// how many (offset, length) pairs were checked.
///
/// # Safety
/// As [`check_one`].
pub unsafe fn sweep(
    c: &dyn Copier,
    dev: *mut u8,
    len: usize,
    view: &dyn View,
    offsets: &[usize],
    lengths: &[usize],
) -> Result<usize> {
    let mut count = 0;
    for &off in offsets {
        for &n in lengths {
            // SAFETY: forwarded contract.
            unsafe { check_one(c, dev, len, view, off, n, (off * 100_003 + n) as u64)? };
            count += 1;
        }
    }
    Ok(count)
}

/// The lengths a sweep uses: every length up to `dense`, then powers of two up to `max` and
/// their neighbours (one less, one more).
pub fn sweep_lengths(dense: usize, max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..=dense).collect();
    let mut p = 1usize;
    while p <= max {
        for q in [p - 1, p, p + 1] {
            if q > dense && q <= max {
                v.push(q);
            }
        }
        p *= 2;
    }
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copiers::Memcpy;

    #[test]
    fn sweep_lengths_are_dense_then_around_powers_of_two() {
        let v = sweep_lengths(4, 64);
        assert_eq!(
            v,
            vec![0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64]
        );
    }

    #[test]
    fn check_passes_a_correct_copier_on_plain_memory() {
        let mut buf = vec![0u8; 8192];
        // SAFETY: `buf` outlives the view and is not otherwise touched meanwhile.
        let view = unsafe { CpuView::new(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: `buf` is the memory the view sees and outlives the sweep.
        let n = unsafe {
            sweep(
                &Memcpy,
                buf.as_mut_ptr(),
                8192,
                &view,
                &[0, 1, 7, 63],
                &sweep_lengths(70, 4096),
            )
        }
        .expect("memcpy is correct");
        assert_eq!(n, 4 * sweep_lengths(70, 4096).len());
    }

    /// Writes one byte too many and reads one byte short: both must be caught.
    struct OffByOne;
    impl Copier for OffByOne {
        fn name(&self) -> String {
            "off-by-one".into()
        }
        unsafe fn to_mapping(&self, dev: *mut u8, host: *const u8, n: usize) {
            // SAFETY: the checker leaves at least 64 spare bytes after the range.
            unsafe {
                std::ptr::copy_nonoverlapping(host, dev, n);
                *dev.add(n) ^= 0xFF;
            }
        }
        unsafe fn from_mapping(&self, host: *mut u8, dev: *const u8, n: usize) {
            // SAFETY: copies n-1 of the n valid bytes.
            unsafe { std::ptr::copy_nonoverlapping(dev, host, n.saturating_sub(1)) };
        }
    }

    #[test]
    fn check_catches_overruns_and_short_copies() {
        let mut buf = vec![0u8; 4096];
        // SAFETY: as above.
        let view = unsafe { CpuView::new(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: `buf` is the memory the view sees and outlives both calls.
        let e = unsafe { check_one(&OffByOne, buf.as_mut_ptr(), 4096, &view, 3, 10, 1) };
        let e = e.unwrap_err();
        assert!(matches!(e, Error::Mismatch { offset: 13, .. }), "{e}");
        // SAFETY: as above.
        let r = unsafe { check_one(&OffByOne, buf.as_mut_ptr(), 4096, &view, 0, 5000, 1) };
        assert!(r.is_err());
    }
}
