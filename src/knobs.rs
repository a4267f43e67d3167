//! Every `FFTD_*` environment variable fftd reads, read here and only here, each with its
//! meaning and default: user settings that do not belong on a command line (a token, a cache
//! folder, a sound device's format, the live view's timeouts) and diagnostics for tests and
//! benchmarks. Kernel and host-path experiments are no knobs: the plan decides (issue 40).
//! docs/knobs.md lists the same table (`tests/knobs.rs` keeps the two in step, checks no other
//! file names a knob and that there are at most 16).
//!
//! A value that does not parse counts as unset (the default), as a knob must never end a run;
//! `FFTD_MIC_FORMAT` and `FFTD_SERVE_TOKEN` are the exceptions, checked where they are used
//! because a user sets them on purpose.

use std::path::PathBuf;
use std::time::Duration;

/// One knob: its name and what it does (docs/knobs.md shows these).
pub(crate) struct Knob {
    pub name: &'static str,
    /// What it is for, beside the name (docs/knobs.md says the same at length).
    #[allow(dead_code)]
    pub meaning: &'static str,
}

/// Every knob fftd reads.
pub(crate) const KNOBS: &[Knob] = &[
    Knob { name: "FFTD_CACHE_DIR", meaning: "user setting: folder of the calibration and auto-route records [default: the user's cache folder/fftd]" },
    Knob { name: "FFTD_ENCODERS", meaning: "user setting: encode threads, for a machine shared with other work [default: one per CPU core]; tests/output_bytes.rs checks that the bytes do not depend on it" },
    Knob { name: "FFTD_ENGINE_AVERAGING", meaning: "diagnostic: 0 sends every frame to the averaging stage instead of reducing --average in the engine, to check one against the other (tests/products.rs)" },
    Knob { name: "FFTD_FAULT_AFTER_BATCHES", meaning: "fault injection for tests: K, K:hang=S, K:panic or DEVICE@K... makes an OpenCL engine fail, hang or panic after K batches, or strike its warm-up (a late device's start-up) with K = warm-up (tests/opencl_multi.rs, tests/opencl_cli.rs, tests/opencl_builder.rs)" },
    Knob { name: "FFTD_HEAP_COUNT", meaning: "diagnostic: 1 counts the heap's live bytes and allocations (by size) for /metrics' fftd_heap_live_* gauges (memory benchmarks, bench/daemon_memory.sh; costs two atomic adds per allocation)" },
    Knob { name: "FFTD_MIC_FORMAT", meaning: "user setting: the capture sample format to ask the sound device for (i16, f32, ...) [default: the device's]" },
    Knob { name: "FFTD_OPENCL_CHUNK_BYTES", meaning: "diagnostic: input bytes per upload/kernel/download chunk of an OpenCL batch; bench/gpu_vs_cufft.sh sets 4294967296 so one launch covers a whole batch, as cuFFT's [default: a pinned batch up to 16 MiB in one chunk, larger ones in 8 MiB chunks; 32 MiB staged]" },
    Knob { name: "FFTD_OPENCL_PROFILE", meaning: "diagnostic: 1 profiles every OpenCL command (kernel times); 0 never [default: on in fftd bench, off in runs unless --stats/--trace]" },
    Knob { name: "FFTD_PLACED_OUTPUT", meaning: "diagnostic: 0 writes outputs through the encoders' byte stream instead of placing rows in a mapped file, to check one against the other (tests/placed_output.rs)" },
    Knob { name: "FFTD_RANGE_READ", meaning: "diagnostic: 0 reads seekable files with one reader each instead of range readers, to check one against the other (tests/range_reader.rs)" },
    Knob { name: "FFTD_SERVE_HEADER_TIMEOUT", meaning: "user setting: seconds a live-view connection may take to send its request header [default: 10]" },
    Knob { name: "FFTD_SERVE_IDLE_TIMEOUT", meaning: "user setting: seconds an idle live-view connection is kept [default: 60]" },
    Knob { name: "FFTD_SERVE_TOKEN", meaning: "user setting: the live view's access token when --serve-token/--serve-token-file are not given (keeps it off the command line)" },
    Knob { name: "FFTD_STALL_SECONDS", meaning: "diagnostic: seconds without progress after which an FFT lane counts as stalled; tests shorten it (tests/opencl_multi.rs) [default: 10]" },
    Knob { name: "FFTD_STUCK_WRITE_SECONDS", meaning: "diagnostic: seconds a write may block after Ctrl-C before fftd gives the output up; tests shorten it (tests/opencl_multi.rs) [default: 1]" },
];

/// The knob's text, when set and not empty.
fn text(name: &str) -> Option<String> {
    debug_assert!(
        KNOBS.iter().any(|k| k.name == name),
        "{name} is not in KNOBS"
    );
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The knob read as a number of type `N` (unset or unparsable: None).
fn number<N: std::str::FromStr>(name: &str) -> Option<N> {
    text(name).and_then(|v| v.trim().parse().ok())
}

/// Whether the knob says "0" (a switch that is on unless turned off).
fn turned_off(name: &str) -> bool {
    text(name).is_some_and(|v| v.trim() == "0")
}

/// A positive, finite number of seconds (anything else: None).
fn seconds(name: &str) -> Option<Duration> {
    number::<f64>(name)
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
}

pub(crate) fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("FFTD_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}
pub(crate) fn encoders() -> Option<usize> {
    number("FFTD_ENCODERS")
}
pub(crate) fn engine_averaging() -> bool {
    !turned_off("FFTD_ENGINE_AVERAGING")
}
pub(crate) fn fault_after_batches() -> Option<String> {
    text("FFTD_FAULT_AFTER_BATCHES")
}
/// `FFTD_MIC_FORMAT` as given (the capture code says when it is not a format).
pub(crate) fn mic_format() -> Option<String> {
    text("FFTD_MIC_FORMAT")
}
pub(crate) const MIC_FORMAT: &str = "FFTD_MIC_FORMAT";
pub(crate) fn opencl_chunk_bytes() -> Option<usize> {
    number("FFTD_OPENCL_CHUNK_BYTES")
}
/// `FFTD_OPENCL_PROFILE`: Some(true) for 1, Some(false) for 0, None (the caller's default)
/// otherwise.
pub(crate) fn opencl_profile() -> Option<bool> {
    match number::<u64>("FFTD_OPENCL_PROFILE") {
        Some(1) => Some(true),
        Some(0) => Some(false),
        _ => None,
    }
}
/// `FFTD_HEAP_COUNT=1`. Read by the global allocator on its first call, so it must not allocate:
/// `getenv` straight, not `std::env`.
pub(crate) fn heap_count() -> bool {
    const NAME: &std::ffi::CStr = c"FFTD_HEAP_COUNT";
    debug_assert!(KNOBS.iter().any(|k| k.name.as_bytes() == NAME.to_bytes()));
    // SAFETY: NAME is a NUL-terminated string; getenv returns null or a pointer to a
    // NUL-terminated string in the environment, read at once (nothing here calls setenv).
    unsafe {
        let value = libc::getenv(NAME.as_ptr());
        !value.is_null() && std::ffi::CStr::from_ptr(value).to_bytes() == b"1"
    }
}
pub(crate) fn placed_output() -> bool {
    !turned_off("FFTD_PLACED_OUTPUT")
}
pub(crate) fn range_read() -> bool {
    !turned_off("FFTD_RANGE_READ")
}
pub(crate) fn serve_header_timeout() -> Option<Duration> {
    seconds("FFTD_SERVE_HEADER_TIMEOUT")
}
pub(crate) fn serve_idle_timeout() -> Option<Duration> {
    seconds("FFTD_SERVE_IDLE_TIMEOUT")
}
pub(crate) const SERVE_TOKEN: &str = "FFTD_SERVE_TOKEN";
/// `FFTD_SERVE_TOKEN` when set, empty too (checked where the token is read: an empty one, as
/// `$(cat missing)` gives, is refused rather than leaving the live view open).
pub(crate) fn serve_token() -> Option<String> {
    // (not UTF-8: kept as such, and refused as a token)
    std::env::var_os(SERVE_TOKEN).map(|t| t.to_string_lossy().into_owned())
}
pub(crate) fn stall_seconds() -> Option<Duration> {
    number::<f64>("FFTD_STALL_SECONDS").and_then(|s| Duration::try_from_secs_f64(s).ok())
}
pub(crate) fn stuck_write_seconds() -> Option<Duration> {
    seconds("FFTD_STUCK_WRITE_SECONDS")
}
