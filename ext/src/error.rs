//! Errors: a positive errno value, what every exported function returns. The cause is logged
//! where it is found (libgdrapi's logging: silent unless `GDRCOPY_ENABLE_LOGGING` is set).

/// A positive errno value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

/// The library's result type.
pub type Result<T> = std::result::Result<T, Errno>;

/// A libgdrapi status (0 or an errno value) as a result; a failure is logged with `what`.
pub fn gdr_status(what: impl FnOnce() -> String, rc: i32) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        gdr_err!("gdrx: {} failed: {}", what(), describe(rc));
        Err(Errno(rc))
    }
}

/// `errno 12 (Cannot allocate memory)`.
pub fn describe(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    format!("errno {errno} ({text})")
}

/// EINVAL with a log line naming the function and the cause.
#[cold]
pub fn invalid(func: &str, why: std::fmt::Arguments<'_>) -> Errno {
    gdr_err!("{func}: {why}");
    Errno(libc::EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_become_errnos() {
        assert_eq!(gdr_status(|| "x".into(), 0), Ok(()));
        assert_eq!(
            gdr_status(|| "x".into(), libc::ENOMEM),
            Err(Errno(libc::ENOMEM))
        );
        assert!(describe(libc::EINVAL).starts_with("errno 22 ("));
    }
}
