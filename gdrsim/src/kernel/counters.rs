//! `gdrsim_get_counters` with the kernel backing: the driver counts come from the real module's
//! traces in `/proc` instead of the emulated driver (which sees nothing).
//!
//! - `open_files`: this process's descriptors of `/dev/gdrdrv` (`/proc/self/fd`);
//! - `live_mappings`: this process's mappings of it (`/proc/self/maps`);
//! - `live_pins`: the provider's live pins (`/proc/driver/nvp2p`), of every process: in the VM
//!   the program under test is the only one that pins;
//! - `ioctls`: gdrdrv ioctls (type 0xDA) this process and its forked children made, counted
//!   where the emulator passes them on ([`count`]).

use crate::counters::Counters;
use crate::driver::IOCTL_TYPE;
use libc::c_ulong;

/// Counts an ioctl passed on to the real driver when it is one of gdrdrv's.
pub fn count(request: c_ulong) {
    if super::active() && (request >> 8) & 0xff == IOCTL_TYPE {
        crate::counters::count_ioctl();
    }
}

/// The counters of this process, `live_allocations` and `live_dmabufs` as `emulated` has them.
pub fn snapshot(emulated: Counters) -> Counters {
    Counters {
        live_pins: provider_pins(),
        live_mappings: device_mappings(),
        open_files: device_fds(),
        ioctls: crate::counters::ioctls(),
        ..emulated
    }
}

fn device_fds() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == "/dev/gdrdrv"))
        .count() as u64
}

fn device_mappings() -> u64 {
    std::fs::read("/proc/self/maps").map_or(0, |m| {
        m.split(|&b| b == b'\n')
            .filter(|l| crate::procmaps::pathname(l) == Some(b"/dev/gdrdrv"))
            .count() as u64
    })
}

fn provider_pins() -> u64 {
    std::fs::read_to_string("/proc/driver/nvp2p")
        .ok()
        .and_then(|s| parse_pins(&s))
        .unwrap_or(0)
}

fn parse_pins(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("pins:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_providers_pin_count() {
        let text = "bar_bytes: 268435456\nfree_bytes: 1\nallocations: 2\npins: 3\n";
        assert_eq!(parse_pins(text), Some(3));
        assert_eq!(parse_pins("pins: x\n"), None);
    }

    #[test]
    fn counts_nothing_without_the_module() {
        assert_eq!(device_fds(), 0);
        assert_eq!(device_mappings(), 0);
    }
}
