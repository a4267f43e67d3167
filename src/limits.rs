//! Upper bounds for the sizes a user can ask for, from what makes sense on this machine: larger
//! values are usage errors that name the flag and the largest accepted value, instead of an
//! allocation failure or a process that spawns threads until it hangs.

/// Samples in one batch buffer at most (2^26: 256 MiB of f32, the largest batch `fftd bench` uses;
/// the OpenCL engine reaches its copy-rate plateau long before).
pub(crate) const MAX_BATCH_SAMPLES: usize = 1 << 26;

/// Samples in one frame at most: a frame must fit one batch buffer (2^26 samples: 256 MiB of
/// f32 per frame, an hour and more of audio; `--frame whole` takes a whole input).
pub(crate) const MAX_FRAME_SAMPLES: usize = MAX_BATCH_SAMPLES;

/// Bytes of frames queued between the readers and the batcher at most (at least two frames):
/// frames of hundreds of MiB must not queue by the thousand.
pub(crate) const FRAME_QUEUE_BYTES: usize = 256 << 20;

/// FFT workers (engines) per OpenCL device unless `--workers` says otherwise: two keep a GPU
/// busy across batch boundaries (one's commands run while the other's host side works), and
/// more only contend for the driver (docs/perf.md, 2026-11-25; three were slower on hop 512
/// and f64 on an H200 in session 26, and three or four gained no job, one GPU or two, at
/// 16 GiB on two H200s in session 36).
pub(crate) const DEVICE_WORKERS: usize = 2;

/// Samples in a default batch (`--batch 0`) for the CPU engines, and for OpenCL devices, whose
/// fixed cost per batch (enqueues, waits) wants larger ones.
pub(crate) const CPU_BATCH_SAMPLES: usize = 1 << 18;
pub(crate) const DEVICE_BATCH_SAMPLES: usize = 1 << 22;

/// FFT workers per CPU core at most: each worker is a thread with its own engine.
pub(crate) const WORKERS_PER_CORE: usize = 4;

/// Longest `--idle-exit` in seconds: a week.
pub(crate) const IDLE_EXIT_S_MAX: f64 = 604_800.0;

/// Longest `--max-latency` in ms: a frame held a minute for its batch to fill is no longer live.
pub(crate) const MAX_LATENCY_MS: f64 = 60_000.0;

/// Inputs played at once with `--realtime` (one reader thread each, asleep most of the time); the
/// rest wait for their turn.
pub(crate) const MAX_PACED_READERS: usize = 256;

/// Sample rates fftd takes, in Hz, whoever states them (`--rate`, a SigMF recording): from a
/// sample every 11.6 days (tide gauges and other slow sensors are well inside) to a terahertz;
/// outside that, times and frequencies computed from the rate leave what f64 seconds and
/// `Duration`s hold (a `--realtime` pace, a PNG's time axis).
pub(crate) const RATE_HZ: (f64, f64) = (1e-6, 1e12);

/// Whether `rate` is a sample rate fftd takes (`RATE_HZ`).
pub(crate) fn rate_in_range(rate: f64) -> bool {
    rate.is_finite() && rate >= RATE_HZ.0 && rate <= RATE_HZ.1
}

/// The largest centre frequency, in Hz, whoever states it (`--center-freq`, a SigMF capture's
/// `core:frequency`, as a magnitude): a terahertz, as for rates. Far beyond it the bins' labels
/// lose their spacing in f64 (at 1e300 every bin had the same label).
pub(crate) const CENTER_HZ_MAX: f64 = 1e12;

/// The range of `--calibration`, in dB (what a full-scale sine reads): wide enough for a
/// hydrophone's full scale in dB re 1 µPa; past 300 the calibrated powers leave f32's range
/// (at 400 every dB bin was written as inf).
pub(crate) const CALIBRATION_DB: (f64, f64) = (-200.0, 300.0);

/// Channels in one input at most (WAV's 16-bit channel count).
pub(crate) const MAX_CHANNELS: usize = u16::MAX as usize;

/// Streams `--channel all` makes of one input at most: each has its own framer, rows and
/// output, made before the run starts (a WAV header's 65535 channels made 65535 files in 90 s,
/// deaf to Ctrl-C meanwhile; 0.7 ms a channel). Inputs are not counted here: ten thousand of
/// them run under a 256-file limit (tests/many_inputs.rs).
pub(crate) const MAX_CHANNEL_STREAMS: usize = 4096;

/// CPU cores this process may use (1 when unknown).
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The largest `--workers` accepted here.
pub(crate) fn max_workers() -> usize {
    WORKERS_PER_CORE * cores()
}

/// Batch buffers that can be in flight at once in one pool for `workers` engines: queued and in
/// the workers, waiting in the sink, and one being filled by each range reader (one per core).
pub(crate) fn batch_buffers_in_flight(workers: usize) -> usize {
    4 * workers.max(1) + 4 + cores()
}

/// The largest `--batch` for frames of `n` samples of `sample_bytes` bytes with `workers`
/// engines: at most `MAX_BATCH_SAMPLES` per batch, and every buffer that can be in flight (both
/// pools) within half of the memory fftd may use (`usable_memory_bytes`). At least 1.
pub(crate) fn max_batch_frames(n: usize, sample_bytes: usize, workers: usize) -> usize {
    let by_samples = MAX_BATCH_SAMPLES / n.max(1);
    let by_memory = usable_memory_bytes().map_or(usize::MAX, |total| {
        let per_frame = (n.max(1) * sample_bytes.max(1)) as u64;
        let buffers = 2 * batch_buffers_in_flight(workers) as u64;
        usize::try_from(total / 2 / buffers / per_frame).unwrap_or(usize::MAX)
    });
    by_samples.min(by_memory).max(1)
}

/// The memory this process may use: the machine's (MemTotal in /proc/meminfo), or less where
/// its control group caps it (a container's limit, a service's MemoryMax: cgroup v2's
/// `memory.max`, v1's `memory.limit_in_bytes`). None where neither can be read. Read once a
/// process: each stream's framer asks (ten thousand inputs, ten thousand asks).
pub(crate) fn usable_memory_bytes() -> Option<u64> {
    static USABLE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *USABLE.get_or_init(read_usable_memory_bytes)
}

fn read_usable_memory_bytes() -> Option<u64> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let total = read("/proc/meminfo").and_then(|text| mem_total(&text));
    let groups = read("/proc/self/cgroup").unwrap_or_default();
    let limits = cgroup_limit_files(&groups).into_iter();
    let capped = limits.filter_map(|path| read(&path).and_then(|text| cgroup_limit(&text)));
    total.into_iter().chain(capped).min()
}

/// MemTotal's bytes in /proc/meminfo's `text`.
fn mem_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The files that may hold this process's memory cap, from /proc/self/cgroup's `text`: the
/// root's (inside a container's namespace the group is `/`) and those of its own group and each
/// group above it (a cap on a parent, such as a slice or a pod, holds its children too), for
/// cgroup v2 and v1.
fn cgroup_limit_files(text: &str) -> Vec<String> {
    let mut files = vec![
        "/sys/fs/cgroup/memory.max".to_string(),
        "/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string(),
    ];
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, group) = (parts.next(), parts.next(), parts.next());
        let (folder, file) = match controllers {
            Some("") => ("/sys/fs/cgroup", "memory.max"),
            Some(c) if c.split(',').any(|c| c == "memory") => {
                ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
            }
            _ => continue,
        };
        let mut group = group.unwrap_or("/").trim_end_matches('/');
        while !group.is_empty() {
            files.push(format!("{folder}{group}/{file}"));
            group = group.rsplit_once('/').map_or("", |(above, _)| above);
        }
    }
    files
}

/// A cgroup memory limit file's bytes; None for no limit (`max`, or v1's near-2^63 "none").
fn cgroup_limit(text: &str) -> Option<u64> {
    let bytes: u64 = text.trim().parse().ok()?;
    (bytes < 1 << 60).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_limit_shrinks_with_frame_size_and_never_reaches_zero() {
        let small = max_batch_frames(64, 4, 2);
        let large = max_batch_frames(1 << 20, 4, 2);
        assert!(small >= large, "{small} {large}");
        assert!(small * 64 <= MAX_BATCH_SAMPLES);
        assert_eq!(max_batch_frames(1 << 30, 8, 64), 1);
    }

    #[test]
    fn a_control_groups_memory_cap_is_read_where_it_has_one() {
        assert_eq!(
            mem_total("MemFree: 1 kB\nMemTotal:  2048 kB\n"),
            Some(2 << 20)
        );
        assert_eq!(cgroup_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(cgroup_limit("max\n"), None, "v2: no limit");
        assert_eq!(cgroup_limit("9223372036854771712\n"), None, "v1: no limit");
        let v2 = cgroup_limit_files("0::/system.slice/fftd.service\n");
        let v2_own = "/sys/fs/cgroup/system.slice/fftd.service/memory.max";
        let v2_above = "/sys/fs/cgroup/system.slice/memory.max";
        assert_eq!(
            &v2[2..],
            [v2_own, v2_above],
            "the group, then each above it"
        );
        let v1 = cgroup_limit_files("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n");
        let own = "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes";
        let above = "/sys/fs/cgroup/memory/docker/memory.limit_in_bytes";
        assert_eq!(&v1[2..], [own, above], "{v1:?}");
        assert!(
            usable_memory_bytes().is_some_and(|b| b > 0),
            "this machine's"
        );
    }
}
