//! Fault injection: `GDRSIM_FAIL` / `gdrsim_set_fail`, a comma-separated list of `NAME:N:ERR`
//! rules. The Nth call (1-based, counted from when the spec was set) of NAME fails with ERR;
//! `N` may be `*` for every call. NAME is a gdrdrv request (`PIN_BUFFER`, ...), a system call,
//! a CUDA function or a function of the Vulkan stand-in; for the last, ERR is a negative
//! `VkResult` (a number or a `VK_ERROR_*` name). ERR `panic`, for any NAME, makes the call
//! panic instead, which proves the panic guard of the exported function that made it
//! (`gdrapi-boundary`): a CUDA function returns CUDA_ERROR_UNKNOWN, a Vulkan command
//! VK_ERROR_UNKNOWN, a system call -1 with `errno` EIO.

use crate::forklock::{self, Mutex};
use gdrapi_abi::vk;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const SYSCALL_NAMES: [&str; 4] = ["open", "mmap", "munmap", "close"];

/// The Vulkan stand-in's functions a rule may name: those that return a `VkResult`.
pub const VK_NAMES: [&str; 9] = [
    "vkCreateInstance",
    "vkEnumerateInstanceVersion",
    "vkEnumerateInstanceExtensionProperties",
    "vkEnumeratePhysicalDevices",
    "vkEnumerateDeviceExtensionProperties",
    "vkCreateDevice",
    "vkAllocateMemory",
    "vkMapMemory",
    "vkEnumerateInstanceLayerProperties",
];

/// The `err` of a rule whose ERR is `panic`.
const PANIC: i32 = i32::MIN;

/// One parsed rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    name: String,
    /// `None` for `*`.
    nth: Option<u64>,
    err: i32,
    seen: u64,
}

/// Why a spec was rejected.
#[derive(Debug, PartialEq, Eq)]
pub struct BadSpec(pub String);

/// Parses a whole spec; the empty string gives no rules.
pub fn parse(spec: &str) -> Result<Vec<Rule>, BadSpec> {
    let mut rules = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut parts = item.split(':');
        let (Some(name), Some(n), Some(err), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(BadSpec(format!("{item:?}: expected NAME:N:ERR")));
        };
        let vk = name.starts_with("vk");
        let known = gdrapi_abi::gdrdrv::REQUESTS.iter().any(|r| r.name == name)
            || SYSCALL_NAMES.contains(&name)
            || is_cuda_name(name)
            || VK_NAMES.contains(&name);
        if !known {
            return Err(BadSpec(format!("{item:?}: unknown name {name:?}")));
        }
        let nth = match n {
            "*" => None,
            _ => match n.parse::<u64>() {
                Ok(v) if v >= 1 => Some(v),
                _ => return Err(BadSpec(format!("{item:?}: N must be a number from 1 or *"))),
            },
        };
        let parsed = if err == "panic" {
            Some(PANIC)
        } else if vk {
            parse_vk_err(err)
        } else {
            parse_err(err)
        };
        let err = parsed.ok_or_else(|| BadSpec(format!("{item:?}: unknown error {err:?}")))?;
        rules.push(Rule {
            name: name.to_string(),
            nth,
            err,
            seen: 0,
        });
    }
    Ok(rules)
}

fn is_cuda_name(name: &str) -> bool {
    name.len() > 2
        && name.starts_with("cu")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn parse_err(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (n > 0).then_some(n);
    }
    ERRNO_NAMES
        .iter()
        .find(|(n, _)| *n == s)
        .map(|(_, v)| *v)
        .or_else(|| crate::cuda::errors::code_of(s))
}

/// A Vulkan rule's error: a negative `VkResult`, as a number or the `VK_ERROR_*` name of one
/// of [`VK_ERRORS`].
fn parse_vk_err(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (n < 0).then_some(n);
    }
    // ash's Debug of a known result is its name without the `VK_` prefix.
    let name = s.strip_prefix("VK_")?;
    VK_ERRORS
        .into_iter()
        .find(|r| format!("{r:?}") == name)
        .map(vk::Result::as_raw)
}

/// The Vulkan errors a rule may name.
const VK_ERRORS: [vk::Result; 12] = [
    vk::Result::ERROR_OUT_OF_HOST_MEMORY,
    vk::Result::ERROR_OUT_OF_DEVICE_MEMORY,
    vk::Result::ERROR_INITIALIZATION_FAILED,
    vk::Result::ERROR_DEVICE_LOST,
    vk::Result::ERROR_MEMORY_MAP_FAILED,
    vk::Result::ERROR_LAYER_NOT_PRESENT,
    vk::Result::ERROR_EXTENSION_NOT_PRESENT,
    vk::Result::ERROR_FEATURE_NOT_PRESENT,
    vk::Result::ERROR_INCOMPATIBLE_DRIVER,
    vk::Result::ERROR_TOO_MANY_OBJECTS,
    vk::Result::ERROR_UNKNOWN,
    vk::Result::ERROR_INVALID_EXTERNAL_HANDLE,
];

const ERRNO_NAMES: [(&str, i32); 24] = [
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("ENODEV", libc::ENODEV),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ENOTTY", libc::ENOTTY),
    ("ENOSPC", libc::ENOSPC),
    ("ERANGE", libc::ERANGE),
    ("ENOSYS", libc::ENOSYS),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ENOTSUP", libc::ENOTSUP),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("ENOTSUPP", 524),
];

/// Names match exactly or up to a `_v2` suffix (`cuMemAlloc` also matches `cuMemAlloc_v2`).
fn same_name(rule: &str, called: &str) -> bool {
    rule == called
        || rule.strip_suffix("_v2").unwrap_or(rule) == called.strip_suffix("_v2").unwrap_or(called)
}

/// Counts a call of `called` against every rule and says which error to fail with, if any.
pub fn hit(rules: &mut [Rule], called: &str) -> Option<i32> {
    let mut result = None;
    for r in rules.iter_mut().filter(|r| same_name(&r.name, called)) {
        r.seen += 1;
        if result.is_none() && r.nth.is_none_or(|n| n == r.seen) {
            result = Some(r.err);
        }
    }
    result
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static RULES: Mutex<Vec<Rule>> = Mutex::new(Vec::new());
/// Calls failed by a rule so far (a forked child starts from its parent's count).
static INJECTED: AtomicU64 = AtomicU64::new(0);

/// How many calls a rule has failed (or made panic) in this process so far: the
/// `injected_faults` counter.
pub fn injected() -> u64 {
    INJECTED.load(Ordering::Relaxed)
}

/// Replaces the process's rules with those of `spec` (`None` or empty clears them).
pub fn set(spec: Option<&str>) -> Result<(), BadSpec> {
    let rules = parse(spec.unwrap_or(""))?;
    let mut g = RULES.lock();
    ACTIVE.store(!rules.is_empty(), Ordering::Release);
    *g = rules;
    Ok(())
}

/// Loads `GDRSIM_FAIL` once at start-up; a bad spec is reported and ignored.
pub fn init_from_env() {
    if let Ok(spec) = std::env::var("GDRSIM_FAIL") {
        if let Err(BadSpec(why)) = set(Some(&spec)) {
            eprintln!("gdrsim: ignoring GDRSIM_FAIL: {why}");
        }
    }
}

/// Counts a call of `called`; returns the error it must fail with, if a rule says so, or
/// panics if the rule says `panic` (every caller runs inside an exported function's guard).
pub fn check(called: &str) -> Option<i32> {
    if !ACTIVE.load(Ordering::Acquire) {
        return None;
    }
    let e = hit(&mut RULES.lock(), called);
    if e.is_some() {
        INJECTED.fetch_add(1, Ordering::Relaxed);
    }
    if e == Some(PANIC) {
        panic!("GDRSIM_FAIL: {called} panics, as a rule asks");
    }
    e
}

/// Lets the process's rules be copied into a forked child safely.
pub fn lock_for_fork() {
    std::mem::forget(RULES.lock());
}

/// Undoes [`lock_for_fork`] in the parent.
pub fn unlock_after_fork() {
    // SAFETY: called only after lock_for_fork, on the thread that took the lock (fork handlers
    // run on the forking thread), so the lock is held and owned by us.
    unsafe { RULES.force_unlock() };
}

/// The child's side of [`lock_for_fork`]: the lock is made new (unlocked, no waiters).
pub fn reset_after_fork() {
    // SAFETY: called only by the child's fork handler, in a process of one thread, after
    // lock_for_fork held the lock across the fork, so the rules are consistent.
    unsafe { forklock::reset_in_child(&RULES) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_counts() {
        let mut r = parse("PIN_BUFFER_V2:2:ENOMEM, cuMemAlloc_v2:*:2").unwrap();
        assert_eq!(hit(&mut r, "PIN_BUFFER_V2"), None);
        assert_eq!(hit(&mut r, "PIN_BUFFER_V2"), Some(libc::ENOMEM));
        assert_eq!(hit(&mut r, "PIN_BUFFER_V2"), None);
        assert_eq!(hit(&mut r, "PIN_BUFFER"), None);
        assert_eq!(hit(&mut r, "cuMemAlloc_v2"), Some(2));
        assert_eq!(hit(&mut r, "cuMemAlloc"), Some(2));
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "PIN_BUFFER",
            "PIN_BUFFER:0:EINVAL",
            "NOPE:1:EINVAL",
            "open:1:EWHAT",
            "open:x:1",
            "open:1:1:1",
            "mmap:1:-3",
        ] {
            assert!(parse(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("close:1:5").unwrap()[0].err, 5);
        assert_eq!(parse("cuInit:1:CUDA_ERROR_NO_DEVICE").unwrap()[0].err, 100);
        for name in ["cuInit", "vkMapMemory", "close", "PIN_BUFFER"] {
            assert_eq!(parse(&format!("{name}:1:panic")).unwrap()[0].err, PANIC);
        }
    }

    #[test]
    fn vulkan_rules_take_negative_results() {
        let mut r =
            parse("vkMapMemory:1:-5,vkAllocateMemory:*:VK_ERROR_INVALID_EXTERNAL_HANDLE").unwrap();
        assert_eq!(hit(&mut r, "vkMapMemory"), Some(-5));
        assert_eq!(hit(&mut r, "vkMapMemory"), None);
        assert_eq!(hit(&mut r, "vkAllocateMemory"), Some(-1000072003));
        assert_eq!(hit(&mut r, "vkAllocateMemory"), Some(-1000072003));
        assert_eq!(
            parse("vkCreateInstance:2:VK_ERROR_INCOMPATIBLE_DRIVER").unwrap()[0].err,
            -9
        );
        for bad in [
            "vkMapMemory:1:5",
            "vkMapMemory:1:EINVAL",
            "vkMapMemory:1:CUDA_ERROR_UNKNOWN",
            "vkFreeMemory:1:-5",
            "vkNoSuchThing:1:-1",
            "cuInit:1:-5",
            "cuInit:1:VK_ERROR_UNKNOWN",
        ] {
            assert!(parse(bad).is_err(), "{bad} accepted");
        }
    }
}
