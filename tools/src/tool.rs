//! The flow shared by copybw, copylat and apiperf: load CUDA and libgdrapi, list the GPUs,
//! select one, make its primary context current and check GPUDirect RDMA support, printing
//! upstream's lines; errors become one `ERROR: ...` line on stderr and exit status 1.

use crate::cli::CliError;
use crate::cuda::{CUdevice, Cuda, PrimaryContext};
use crate::gdr::{gdr_info_v2_t, Backend, Gdr, GdrError, Mapping, Pin, Session};
use crate::gpumem::{AllocFn, DeviceBuffer};
use crate::output::fmt_ptr;
use gdrapi_support::cuda::attr;
use std::fmt;
use std::process::ExitCode;

/// A fatal error of a tool: printed as one line, exit status 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fatal(pub String);

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for Fatal {
    fn from(e: E) -> Fatal {
        Fatal(e.to_string())
    }
}

/// What `main` should do after parsing the command line.
pub enum Parsed<T> {
    /// Run with these options.
    Run(T),
    /// `-h` was given: print usage, exit 0.
    Help,
}

/// Runs a tool: parses, prints usage on `-h` (exit 0) or on a bad flag (stderr, exit 1), and
/// turns a [`Fatal`] from `run` into `ERROR: <reason>` and exit 1.
pub fn main_with<T>(
    parse: impl FnOnce(&[String]) -> Result<Parsed<T>, CliError>,
    usage: impl Fn(&str) -> String,
    run: impl FnOnce(T) -> Result<(), Fatal>,
) -> ExitCode {
    crate::output::default_sigpipe();
    let argv: Vec<String> = std::env::args().collect();
    let prog = argv.first().cloned().unwrap_or_else(|| "gdrcopy".into());
    match parse(argv.get(1..).unwrap_or(&[])) {
        Ok(Parsed::Help) => {
            print!("{}", usage(&prog));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ERROR: {e}");
            eprint!("{}", usage(&prog));
            ExitCode::FAILURE
        }
        Ok(Parsed::Run(opts)) => match run(opts) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ERROR: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Loads the CUDA driver, with a one-line reason when there is none.
pub fn load_cuda() -> Result<Cuda, Fatal> {
    Cuda::load().map_err(|e| Fatal(format!("no usable CUDA driver ({e})")))
}

/// Loads libgdrapi, with a one-line reason when it cannot.
pub fn load_gdr() -> Result<Gdr, Fatal> {
    Gdr::load().map_err(|e| Fatal(format!("cannot use libgdrapi ({e})")))
}

/// `gdr_open`, with a pointer to `gdrcopy doctor` when it fails.
pub fn open_gdr(gdr: &Gdr) -> Result<crate::gdr::Session<'_>, Fatal> {
    gdr.open()
        .map_err(|e| Fatal(format!("{e}; run `gdrcopy doctor` to find out why")))
}

/// The error of a pin of memory from `alloc` in `session`: when the Vulkan backend refuses
/// memory it cannot map (EINVAL), it says which allocation to use instead.
pub fn pin_error(session: &Session<'_>, alloc: AllocFn, e: GdrError) -> Fatal {
    if e.code == libc::EINVAL
        && alloc != AllocFn::MemCreateFd
        && session.backend() == Backend::Vulkan
    {
        return Fatal(format!(
            "{e}; the Vulkan backend maps only VMM memory exportable as a file descriptor: use -a {}",
            AllocFn::MemCreateFd.name()
        ));
    }
    e.into()
}

/// `cuInit`, prints `GPU id:<n>; name: <name>; Bus id: <dddd>:<bb>:<dd>` for every GPU and
/// `selecting device <n>`, and returns the selected device.
pub fn list_and_select(cuda: &Cuda, dev_id: i32) -> Result<CUdevice, Fatal> {
    cuda.init()?;
    let n = cuda.device_count()?;
    if n == 0 {
        return Err(Fatal("no CUDA device found".into()));
    }
    for i in 0..n {
        let dev = cuda.device(i)?;
        let name = cuda.device_name(dev)?;
        let domain = cuda.attribute(attr::PCI_DOMAIN_ID, dev)?;
        let bus = cuda.attribute(attr::PCI_BUS_ID, dev)?;
        let device = cuda.attribute(attr::PCI_DEVICE_ID, dev)?;
        println!("GPU id:{i}; name: {name}; Bus id: {domain:04x}:{bus:02x}:{device:02x}");
    }
    println!("selecting device {dev_id}");
    if dev_id >= n {
        return Err(Fatal(format!("GPU {dev_id} does not exist ({n} found)")));
    }
    Ok(cuda.device(dev_id)?)
}

/// [`list_and_select`], then makes the selected GPU's primary context current until the
/// returned context is dropped.
pub fn select_gpu(cuda: &Cuda, dev_id: i32) -> Result<(CUdevice, PrimaryContext<'_>), Fatal> {
    let dev = list_and_select(cuda, dev_id)?;
    let ctx = cuda.primary_context(dev)?;
    Ok((dev, ctx))
}

/// [`load_gdr`], then [`check_gdr_support`] for `dev`.
pub fn load_gdr_for(cuda: &Cuda, dev: CUdevice) -> Result<Gdr, Fatal> {
    let gdr = load_gdr()?;
    check_gdr_support(cuda, &gdr, dev)?;
    Ok(gdr)
}

/// Allocates the benchmark's buffer of `size` bytes on `dev` and prints `device ptr: 0x<ptr>`
/// and `allocated size: <size>` (copylat's and apiperf's lines).
pub fn alloc_reported(
    cuda: &Cuda,
    alloc: AllocFn,
    size: usize,
    dev: CUdevice,
) -> Result<DeviceBuffer<'_>, Fatal> {
    let buf = DeviceBuffer::alloc(cuda, alloc, size, dev)?;
    println!("device ptr: 0x{:x}", buf.ptr());
    println!("allocated size: {size}");
    Ok(buf)
}

/// Prints `map_d_ptr`, then what `gdr_get_info_v2` reports for `pin` (`info.va` to
/// `info.wc_mapping`) and `page offset` (where `d_a` lies past `info.va`), as upstream's
/// benchmarks do; returns the info and that offset.
pub fn report_mapping(pin: &Pin, map: &Mapping, d_a: u64) -> Result<(gdr_info_v2_t, usize), Fatal> {
    println!("map_d_ptr: {}", fmt_ptr(map.ptr() as u64));
    let info = pin.info()?;
    println!("info.va: {:x}", info.va);
    println!("info.mapped_size: {}", info.mapped_size);
    println!("info.page_size: {}", info.page_size);
    println!("info.mapped: {}", info.mapped());
    println!("info.wc_mapping: {}", info.wc_mapping());
    let off = d_a.wrapping_sub(info.va) as usize;
    println!("page offset: {off}");
    Ok((info, off))
}

/// Upstream's `check_gdr_support`: with CUDA >= 11.3 the GPUDirect RDMA device attribute
/// must be 1; older drivers are checked by pinning one GPU page through libgdrapi.
pub fn check_gdr_support(cuda: &Cuda, gdr: &Gdr, dev: CUdevice) -> Result<(), Fatal> {
    let version = cuda.driver_version()?;
    if version >= crate::cuda::RDMA_ATTR_MIN_VERSION {
        if cuda.attribute(attr::GPU_DIRECT_RDMA_SUPPORTED, dev)? == 0 {
            return Err(Fatal("this GPU does not support GPUDirect RDMA".into()));
        }
        return Ok(());
    }
    let buf = DeviceBuffer::alloc(cuda, AllocFn::MemAlloc, crate::gdr::GPU_PAGE_SIZE, dev)?;
    let session = open_gdr(gdr)?;
    let pin = session
        .pin(buf.ptr(), buf.size())
        .map_err(|e| Fatal(format!("{e}; this GPU might not support GPUDirect RDMA")))?;
    pin.unpin()?;
    session.close()?;
    Ok(())
}

/// Elapsed microseconds since `t`.
pub fn elapsed_us(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// Upstream's walking-bit test pattern over whole 32-bit words (native endianness).
pub fn fill_walking_bit(buf: &mut [u8]) {
    for (w, chunk) in buf.chunks_exact_mut(4).enumerate() {
        let v: u32 = 0x3F4C_5E6A ^ (1u32 << (w % 32));
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
}

/// Compares whole 32-bit words of `got` against `expected` and prints upstream's mismatch
/// table (header then at most ten rows) on stdout; returns the number of differing words.
pub fn compare_words(expected: &[u8], got: &[u8]) -> usize {
    let n = expected.len().min(got.len()) / 4;
    let mut diff = 0;
    for w in 0..n {
        let e = u32::from_ne_bytes([
            expected[4 * w],
            expected[4 * w + 1],
            expected[4 * w + 2],
            expected[4 * w + 3],
        ]);
        let g = u32::from_ne_bytes([got[4 * w], got[4 * w + 1], got[4 * w + 2], got[4 * w + 3]]);
        if e != g {
            if diff == 0 {
                println!("{:>10} {:>8} {:>8}", "word", "content", "expected");
            }
            if diff < 10 {
                println!("{w:>10} {g:08x} {e:08x}");
            }
            diff += 1;
        }
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walking_bit_pattern_and_compare() {
        let mut a = vec![0u8; 64];
        fill_walking_bit(&mut a);
        assert_eq!(u32::from_ne_bytes(a[0..4].try_into().unwrap()), 0x3F4C_5E6B);
        assert_eq!(u32::from_ne_bytes(a[4..8].try_into().unwrap()), 0x3F4C_5E68);
        let mut b = a.clone();
        assert_eq!(compare_words(&a, &b), 0);
        b[5] ^= 0xff;
        b[63] ^= 1;
        assert_eq!(compare_words(&a, &b), 2);
    }

    #[test]
    fn fatal_from_any_error_keeps_the_text() {
        let e = crate::gdr::GdrError {
            func: "gdr_pin_buffer",
            code: libc::EINVAL,
        };
        let f: Fatal = e.into();
        assert!(f.0.starts_with("gdr_pin_buffer failed"));
    }
}
