//! Naturally aligned scalar device accesses (1, 2, 4 or 8 bytes), the building block of the
//! head and tail of the write-combining path and of the whole device-mapping path.
//!
//! The direction of a copy is a type ([`ToMapping`], [`FromMapping`]), the crate's only one:
//! the C entries pick it, and one body of each path below serves both. The device side of
//! every access is volatile, the host side may be unaligned. Width choice follows the
//! device pointer only: a head grows the pointer's alignment one bit at a time while the
//! width fits in what is left, and a tail walks the remaining length's bits from the largest
//! down. Both give naturally aligned accesses (see [`head`] and [`tail`]).

use core::ptr;

use super::kernels::Bulk;

/// One direction of copy: which way it goes, what a single device access does, and how a
/// bulk kernel is called. (The whole fenced copy is [`super::copy`], not a method: rustc
/// treats every trait method as reachable from other crates, so one that reached the copy
/// engine's statics would make them visible outside the shared object, and every copy would
/// then reach them through the GOT.)
pub(crate) trait Direction {
    /// True for host to device ([`ToMapping`]).
    const TO_DEVICE: bool;

    /// Moves one `T` between the device address `dev` and the host address `host`.
    ///
    /// # Safety
    /// `dev` must be aligned for `T` and valid for a `T` access in this direction; `host`
    /// valid for the opposite access (any alignment).
    unsafe fn unit<T: Copy>(dev: *mut u8, host: *mut u8);

    /// Calls `k` with the device pointer in the position its direction expects.
    ///
    /// # Safety
    /// The [`Bulk`] contract for `dev`, `host` and `n`.
    unsafe fn bulk(k: Bulk, dev: *mut u8, host: *mut u8, n: usize);
}

/// Host to device (`gdr_copy_to_mapping`).
pub(crate) struct ToMapping;
/// Device to host (`gdr_copy_from_mapping`).
pub(crate) struct FromMapping;

impl Direction for ToMapping {
    const TO_DEVICE: bool = true;

    #[inline(always)]
    unsafe fn unit<T: Copy>(dev: *mut u8, host: *mut u8) {
        trace::record(dev, core::mem::size_of::<T>(), false);
        // SAFETY: the caller guarantees `dev` is aligned and writable for a `T` and `host`
        // readable for `size_of::<T>()` bytes.
        unsafe { ptr::write_volatile(dev.cast::<T>(), ptr::read_unaligned(host.cast::<T>())) }
    }

    #[inline(always)]
    unsafe fn bulk(k: Bulk, dev: *mut u8, host: *mut u8, n: usize) {
        trace::record(dev, n, true);
        // SAFETY: forwarded caller contract; stores take (dst = device, src = host).
        unsafe { k(dev, host, n) }
    }
}

impl Direction for FromMapping {
    const TO_DEVICE: bool = false;

    #[inline(always)]
    unsafe fn unit<T: Copy>(dev: *mut u8, host: *mut u8) {
        trace::record(dev, core::mem::size_of::<T>(), false);
        // SAFETY: the caller guarantees `dev` is aligned and readable for a `T` and `host`
        // writable for `size_of::<T>()` bytes.
        unsafe { ptr::write_unaligned(host.cast::<T>(), ptr::read_volatile(dev.cast::<T>())) }
    }

    #[inline(always)]
    unsafe fn bulk(k: Bulk, dev: *mut u8, host: *mut u8, n: usize) {
        trace::record(dev, n, true);
        // SAFETY: forwarded caller contract; loads take (dst = host, src = device).
        unsafe { k(host, dev, n) }
    }
}

/// A copy in progress: the two cursors and the bytes left.
pub(crate) struct Cursor {
    pub dev: *mut u8,
    pub host: *mut u8,
    pub n: usize,
}

impl Cursor {
    /// Advances both cursors by `k` bytes (`k <= n`).
    #[inline(always)]
    pub fn advance(&mut self, k: usize) {
        self.dev = self.dev.wrapping_add(k);
        self.host = self.host.wrapping_add(k);
        self.n -= k;
    }

    /// One `T` access at the cursors, then advance.
    ///
    /// # Safety
    /// `size_of::<T>() <= n`, the device cursor aligned for `T`, both ranges valid.
    #[inline(always)]
    unsafe fn step<D: Direction, T: Copy>(&mut self) {
        // SAFETY: forwarded.
        unsafe { D::unit::<T>(self.dev, self.host) };
        self.advance(core::mem::size_of::<T>());
    }
}

/// Raises the device cursor's alignment bit by bit (1, 2, 4 and, when `TO16`, 8 bytes) while
/// each access fits, so that it ends `16`- (or `8`-) aligned, or stops early with `n` smaller
/// than the device cursor's alignment; [`tail`] then finishes naturally aligned.
///
/// # Safety
/// Both ranges `[cursor, cursor + n)` valid for the direction.
#[inline(always)]
pub(crate) unsafe fn head<D: Direction, const TO16: bool>(c: &mut Cursor) {
    // SAFETY: (each step) the tested bit is the lowest set bit of the device address, so the
    // access is naturally aligned, and `c.n >= width` is checked first.
    unsafe {
        if c.dev as usize & 1 != 0 && c.n >= 1 {
            c.step::<D, u8>();
        }
        if c.dev as usize & 2 != 0 && c.n >= 2 {
            c.step::<D, u16>();
        }
        if c.dev as usize & 4 != 0 && c.n >= 4 {
            c.step::<D, u32>();
        }
        if TO16 && c.dev as usize & 8 != 0 && c.n >= 8 {
            c.step::<D, u64>();
        }
    }
}

/// Copies the last `n < 16` bytes, largest power of two first. Naturally aligned when the
/// device cursor is aligned to the largest power of two not above `n` (true after [`head`]
/// and after any run of wider aligned units).
///
/// # Safety
/// `c.n < 16`, both ranges valid, alignment as stated.
#[inline(always)]
pub(crate) unsafe fn tail<D: Direction>(c: &mut Cursor) {
    debug_assert!(c.n < 16);
    // SAFETY: each width is a set bit of `n`, taken in decreasing order, so it fits, and the
    // device cursor has only advanced by larger powers of two, so it stays aligned.
    unsafe {
        if c.n & 8 != 0 {
            c.step::<D, u64>();
        }
        if c.n & 4 != 0 {
            c.step::<D, u32>();
        }
        if c.n & 2 != 0 {
            c.step::<D, u16>();
        }
        if c.n & 1 != 0 {
            c.step::<D, u8>();
        }
    }
}

/// The device-mapping path: naturally aligned accesses no wider than 8 bytes, whatever the
/// host alignment (upstream's rule for `GDR_MAPPING_TYPE_DEVICE`, without its `memcpy`
/// shortcut, whose access widths nobody controls).
///
/// # Safety
/// `dev..dev+n` a device range valid for the direction, `host..host+n` the host range.
#[inline(always)]
pub(crate) unsafe fn device<D: Direction>(dev: *mut u8, host: *mut u8, n: usize) {
    let mut c = Cursor { dev, host, n };
    // SAFETY: `head`/`tail` as documented; the loops take 8-byte units on an 8-aligned device
    // cursor (after `head`, either it is 8-aligned or `n < 8` and the loops do not run).
    unsafe {
        head::<D, false>(&mut c);
        while c.n >= 32 {
            D::unit::<u64>(c.dev, c.host);
            D::unit::<u64>(c.dev.add(8), c.host.add(8));
            D::unit::<u64>(c.dev.add(16), c.host.add(16));
            D::unit::<u64>(c.dev.add(24), c.host.add(24));
            c.advance(32);
        }
        while c.n >= 8 {
            c.step::<D, u64>();
        }
        tail::<D>(&mut c);
    }
}

/// Test-only record of device accesses (address, width, whether it was a bulk kernel call),
/// so that tests can prove alignment and exact coverage. Compiles to nothing outside tests.
pub(crate) mod trace {
    #[cfg(test)]
    use std::cell::RefCell;

    /// One device access: start address, length, and whether it is a bulk kernel range.
    #[cfg(test)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Access {
        pub addr: usize,
        pub len: usize,
        pub bulk: bool,
    }

    #[cfg(test)]
    thread_local! {
        static LOG: RefCell<Option<Vec<Access>>> = const { RefCell::new(None) };
    }

    /// Records one access when a test is capturing on this thread.
    #[inline(always)]
    pub fn record(addr: *mut u8, len: usize, bulk: bool) {
        #[cfg(test)]
        LOG.with(|l| {
            if let Some(v) = l.borrow_mut().as_mut() {
                v.push(Access {
                    addr: addr as usize,
                    len,
                    bulk,
                });
            }
        });
        #[cfg(not(test))]
        let _ = (addr, len, bulk);
    }

    /// Runs `f` and returns the device accesses it made on this thread.
    #[cfg(test)]
    pub fn capture(f: impl FnOnce()) -> Vec<Access> {
        LOG.with(|l| *l.borrow_mut() = Some(Vec::new()));
        f();
        LOG.with(|l| l.borrow_mut().take()).unwrap_or_default()
    }
}
