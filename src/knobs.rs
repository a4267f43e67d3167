//! Every `FFTD_*` environment variable fftd reads, read here and only here, each with its
//! meaning and default. These are knobs for tests, benchmarks and odd hardware, not options:
//! users set options on the command line or in the config file. docs/knobs.md lists the same
//! table (`tests/layers.rs` keeps the two in step and checks no other file names a knob).
//!
//! A value that does not parse counts as unset (the default), as a knob must never end a run;
//! `FFTD_MIC_FORMAT` and `FFTD_SERVE_TOKEN` are the exceptions, checked where they are used
//! because a user sets them on purpose.

use std::path::PathBuf;
use std::time::Duration;

/// One knob: its name and what it does (docs/knobs.md shows these).
pub struct Knob {
    pub name: &'static str,
    pub meaning: &'static str,
}

/// Every knob fftd reads.
pub const KNOBS: &[Knob] = &[
    Knob { name: "FFTD_CACHE_DIR", meaning: "folder of the calibration and auto-route records [default: the user's cache folder/fftd]" },
    Knob { name: "FFTD_ENCODERS", meaning: "encode threads [default: one per CPU core]" },
    Knob { name: "FFTD_ENGINE_AVERAGING", meaning: "0: every frame goes to the averaging stage instead of being reduced in the engine (for comparisons)" },
    Knob { name: "FFTD_EXIT_TEARDOWN", meaning: "1: release device engines and pinned memory before the exit instead of leaving them to it (for comparisons)" },
    Knob { name: "FFTD_FAULT_AFTER_BATCHES", meaning: "fault injection for tests: K, K:hang=S, K:panic or DEVICE@K... makes an OpenCL engine fail, hang or panic after K batches" },
    Knob { name: "FFTD_HEAP_COUNT", meaning: "1: count the heap's live bytes and allocations (by size) for /metrics' fftd_heap_live_* gauges (memory benchmarks; costs two atomic adds per allocation)" },
    Knob { name: "FFTD_MIC_FORMAT", meaning: "the capture sample format to ask the sound device for (i16, f32, ...) [default: the device's]" },
    Knob { name: "FFTD_OPENCL_CHUNK_BYTES", meaning: "bytes per upload/kernel/download chunk of an OpenCL batch [default: chosen per device]" },
    Knob { name: "FFTD_OPENCL_CHUNKED", meaning: "0: no split exchange in rounds for complex frames that fit local memory only a half or a quarter at a time (they take the four-step path); 1: also at 16384 points, which by default take four-step (A/B)" },
    Knob { name: "FFTD_OPENCL_DEFINES", meaning: "extra -D options for the OpenCL program build" },
    Knob { name: "FFTD_OPENCL_FOURSTEP_FPB", meaning: "most transforms per work-group of a four-step stage (a power of two, 4..64) [default: 16]" },
    Knob { name: "FFTD_OPENCL_FOURSTEP_FROM", meaning: "complex points per frame (n, or n/2 for even real n) from which powers of two take the four-step path even where one kernel fits [default: only where it does not]" },
    Knob { name: "FFTD_OPENCL_FOURSTEP_RECUR", meaning: "1: the four-step kernels compute one store twiddle per work-item with cospi/sinpi and the rest by a complex multiplication per point, instead of cospi/sinpi for every one (opt-in: checked on PoCL only, not yet timed or checked on a GPU)" },
    Knob { name: "FFTD_OPENCL_L2_BLOCK", meaning: "bytes of work buffer per block of frames on the four-step and two-level paths: their kernels run block by block so the intermediates can stay in the L2 cache [default: off, one launch over all frames]" },
    Knob { name: "FFTD_OPENCL_LOCAL_LIMIT", meaning: "local memory bytes the kernels may use [default: the device's]" },
    Knob { name: "FFTD_OPENCL_MAX_TPF", meaning: "most threads per frame in the local-memory kernel (a power of two) [default: 256]" },
    Knob { name: "FFTD_OPENCL_PROFILE", meaning: "1: profile every OpenCL command (kernel times); 0: never [default: on in fftd bench, off in runs unless --stats/--trace]" },
    Knob { name: "FFTD_OPENCL_RADIX", meaning: "8: radix-8 passes instead of radix-16" },
    Knob { name: "FFTD_OPENCL_REAL_PAIRS", meaning: "1: odd real frames through two-level Bluestein two to a transform (the real and imaginary parts of one complex frame) instead of one (opt-in: checked on PoCL only, not yet timed or checked on a GPU)" },
    Knob { name: "FFTD_OPENCL_SPLIT_FROM", meaning: "frame size from which the local kernel uses the split exchange [default: only when local memory is short]" },
    Knob { name: "FFTD_OPENCL_SPLIT_PAIRED", meaning: "1: real frames on the split-exchange path (real 16384 f32) finish from the last pass's registers instead of through a store phase in local memory (opt-in: checked on PoCL only, not yet timed or checked on a GPU)" },
    Knob { name: "FFTD_OPENCL_SPLIT_LAST32", meaning: "1: fold a radix-2 leftover into a split radix-32 last pass (opt-in, tested for correctness only)" },
    Knob { name: "FFTD_OPENCL_TARGET_WG", meaning: "work-group size the local kernel aims for [default: chosen per device]" },
    Knob { name: "FFTD_OPENCL_TWO_LEVEL", meaning: "0: no two-level path (column then row FFTs in local memory) nor one-kernel Bluestein, for large sizes that are not powers of two, Bluestein and powers of two past the four-step path; those go back to the global-memory passes (A/B)" },
    Knob { name: "FFTD_PINNED_BATCHES", meaning: "0: batches in ordinary memory instead of the device's pinned memory (the engine stages every copy)" },
    Knob { name: "FFTD_PLACED_OUTPUT", meaning: "0: write outputs through the encoders' byte stream instead of placing rows in a mapped file" },
    Knob { name: "FFTD_RANGE_READ", meaning: "0: read seekable files with one reader each instead of range readers" },
    Knob { name: "FFTD_SERVE_HEADER_TIMEOUT", meaning: "seconds a live-view connection may take to send its request header [default: 10]" },
    Knob { name: "FFTD_SERVE_IDLE_TIMEOUT", meaning: "seconds an idle live-view connection is kept [default: 60]" },
    Knob { name: "FFTD_SERVE_TOKEN", meaning: "the live view's access token when --serve-token/--serve-token-file are not given" },
    Knob { name: "FFTD_STALL_SECONDS", meaning: "seconds without progress after which an FFT lane counts as stalled [default: 10]" },
    Knob { name: "FFTD_STUCK_WRITE_SECONDS", meaning: "seconds a write may block after Ctrl-C before fftd gives the output up [default: 1]" },
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

fn turned_on(name: &str) -> bool {
    text(name).is_some_and(|v| v.trim() == "1")
}

/// A positive, finite number of seconds (anything else: None).
fn seconds(name: &str) -> Option<Duration> {
    number::<f64>(name)
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
}

pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("FFTD_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}
pub fn encoders() -> Option<usize> {
    number("FFTD_ENCODERS")
}
pub fn engine_averaging() -> bool {
    !turned_off("FFTD_ENGINE_AVERAGING")
}
pub fn fault_after_batches() -> Option<String> {
    text("FFTD_FAULT_AFTER_BATCHES")
}
/// `FFTD_MIC_FORMAT` as given (the capture code says when it is not a format).
pub fn mic_format() -> Option<String> {
    text("FFTD_MIC_FORMAT")
}
pub const MIC_FORMAT: &str = "FFTD_MIC_FORMAT";
/// `FFTD_OPENCL_CHUNKED`: the split exchange in rounds for complex frames of `points` (those that
/// need it take the four-step path otherwise). Unset: below 16384 points (the one kernel at
/// 16384 needs about 100 registers a work-item: 0.18x cuFFT on an H200 against 0.68x for
/// four-step, docs/perf.md); 0: never; 1: up to 16384 points (A/B measurements).
pub fn opencl_chunked(points: usize) -> bool {
    match text("FFTD_OPENCL_CHUNKED").as_deref().map(str::trim) {
        Some("0") => false,
        Some("1") => true,
        _ => points < 1 << 14,
    }
}
pub fn opencl_chunk_bytes() -> Option<usize> {
    number("FFTD_OPENCL_CHUNK_BYTES")
}
pub fn opencl_defines() -> String {
    text("FFTD_OPENCL_DEFINES").unwrap_or_default()
}
/// `FFTD_OPENCL_FOURSTEP_FPB`: most transforms per four-step work-group (a power of two 4..64).
pub fn opencl_fourstep_fpb() -> Option<usize> {
    number::<usize>("FFTD_OPENCL_FOURSTEP_FPB")
        .filter(|v| v.is_power_of_two() && (4..=64).contains(v))
}
/// `FFTD_OPENCL_FOURSTEP_FROM=M`: powers of two of M complex points and more take the four-step
/// path even where one kernel fits (plan.rs), for A/B measurements.
pub fn opencl_fourstep_from() -> Option<usize> {
    number::<usize>("FFTD_OPENCL_FOURSTEP_FROM").filter(|&m| m > 0)
}
/// `FFTD_OPENCL_FOURSTEP_RECUR=1`: four-step store twiddles by recurrence (fourstep.cl
/// FS_TW_RECUR), opt-in until timed and checked on a GPU.
pub fn opencl_fourstep_recur() -> bool {
    turned_on("FFTD_OPENCL_FOURSTEP_RECUR")
}
/// `FFTD_OPENCL_L2_BLOCK=BYTES`: the four-step and two-level paths in blocks of frames whose
/// work buffer takes about BYTES (plan.rs and twolevel.rs `block`); unset or 0: one launch over
/// all frames.
pub fn opencl_l2_block() -> Option<usize> {
    number::<usize>("FFTD_OPENCL_L2_BLOCK").filter(|&b| b > 0)
}
pub fn opencl_local_limit() -> Option<usize> {
    number("FFTD_OPENCL_LOCAL_LIMIT")
}
pub fn opencl_max_tpf() -> Option<usize> {
    number::<usize>("FFTD_OPENCL_MAX_TPF").filter(|v| v.is_power_of_two())
}
/// `FFTD_OPENCL_PROFILE`: Some(true) for 1, Some(false) for 0, None (the caller's default)
/// otherwise.
pub fn opencl_profile() -> Option<bool> {
    match number::<u64>("FFTD_OPENCL_PROFILE") {
        Some(1) => Some(true),
        Some(0) => Some(false),
        _ => None,
    }
}
pub fn opencl_radix8() -> bool {
    text("FFTD_OPENCL_RADIX").is_some_and(|v| v.trim() == "8")
}
/// `FFTD_OPENCL_REAL_PAIRS=1`: odd real frames on the two-level Bluestein path two to a
/// transform (twolevel.rs `pairs`), opt-in until timed and checked on a GPU.
pub fn opencl_real_pairs() -> bool {
    turned_on("FFTD_OPENCL_REAL_PAIRS")
}
pub fn opencl_split_from() -> Option<usize> {
    number("FFTD_OPENCL_SPLIT_FROM")
}
/// `FFTD_OPENCL_SPLIT_PAIRED=1`: real frames on the split path store from registers
/// (stockham_local.cl PAIRED_STORE), opt-in until timed and checked on a GPU.
pub fn opencl_split_paired() -> bool {
    turned_on("FFTD_OPENCL_SPLIT_PAIRED")
}
pub fn opencl_split_last32() -> bool {
    text("FFTD_OPENCL_SPLIT_LAST32").is_some_and(|v| v.trim() == "1")
}
/// `FFTD_OPENCL_TWO_LEVEL=0`: no two-level path (twolevel.rs); the sizes it takes go back to
/// the global-memory passes (A/B measurements).
pub fn opencl_two_level() -> bool {
    !turned_off("FFTD_OPENCL_TWO_LEVEL")
}
pub fn opencl_target_wg() -> Option<usize> {
    number("FFTD_OPENCL_TARGET_WG")
}
pub fn exit_teardown() -> bool {
    text("FFTD_EXIT_TEARDOWN").is_some_and(|v| v.trim() == "1")
}
/// `FFTD_HEAP_COUNT=1`. Read by the global allocator on its first call, so it must not allocate:
/// `getenv` straight, not `std::env`.
pub fn heap_count() -> bool {
    const NAME: &std::ffi::CStr = c"FFTD_HEAP_COUNT";
    debug_assert!(KNOBS.iter().any(|k| k.name.as_bytes() == NAME.to_bytes()));
    // SAFETY: NAME is a NUL-terminated string; getenv returns null or a pointer to a
    // NUL-terminated string in the environment, read at once (nothing here calls setenv).
    unsafe {
        let value = libc::getenv(NAME.as_ptr());
        !value.is_null() && std::ffi::CStr::from_ptr(value).to_bytes() == b"1"
    }
}
pub fn pinned_batches() -> bool {
    !turned_off("FFTD_PINNED_BATCHES")
}
pub fn placed_output() -> bool {
    !turned_off("FFTD_PLACED_OUTPUT")
}
pub fn range_read() -> bool {
    !turned_off("FFTD_RANGE_READ")
}
pub fn serve_header_timeout() -> Option<Duration> {
    seconds("FFTD_SERVE_HEADER_TIMEOUT")
}
pub fn serve_idle_timeout() -> Option<Duration> {
    seconds("FFTD_SERVE_IDLE_TIMEOUT")
}
pub const SERVE_TOKEN: &str = "FFTD_SERVE_TOKEN";
/// `FFTD_SERVE_TOKEN` when set and not empty (checked where the token is read).
pub fn serve_token() -> Option<String> {
    std::env::var(SERVE_TOKEN).ok().filter(|t| !t.is_empty())
}
pub fn stall_seconds() -> Option<Duration> {
    number::<f64>("FFTD_STALL_SECONDS").and_then(|s| Duration::try_from_secs_f64(s).ok())
}
pub fn stuck_write_seconds() -> Option<Duration> {
    seconds("FFTD_STUCK_WRITE_SECONDS")
}
