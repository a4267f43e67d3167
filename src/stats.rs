//! Run statistics: frame counters and stage times shared by all stages, and the frame-to-sink
//! latency histogram kept by the sink. `--stats` prints them at exit: the counters and latency on
//! one line, and on a second line where the time went (which stage waited on which), to tell
//! what bounds a run's throughput.

use crate::timeline::Phase;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct Counters {
    /// Frames cut by the framers.
    pub frames_in: AtomicU64,
    /// Frames written by the sinks.
    pub frames_out: AtomicU64,
    /// Frames dropped because the FFT stage fell behind live input.
    pub dropped: AtomicU64,
    /// Samples read from all sources (per channel: sample frames of a many-channel input).
    pub samples_in: AtomicU64,
    /// Samples of the inputs that lie in analysed frames, each counted once (per channel as
    /// `samples_in`): fewer than read when `--max-frames`, `--duration`, `--tail drop` or a hop
    /// longer than the frame leave some out, or live frames are dropped.
    pub samples_analysed: AtomicU64,
    /// Nanoseconds file readers spent waiting for room in the frame channel (the stages after
    /// them were busy).
    pub reader_wait_ns: AtomicU64,
    /// Nanoseconds the batcher spent waiting for a free FFT worker.
    pub batcher_wait_ns: AtomicU64,
    /// Nanoseconds the FFT workers spent in their engines, summed over workers.
    pub engine_ns: AtomicU64,
    /// Nanoseconds the encode threads spent turning spectra into bytes (fftshift, format),
    /// summed over threads.
    pub encode_ns: AtomicU64,
    /// Rows the sink wrote from the spectra buffers themselves, no encoder copying them
    /// (`pipeline::encode::Encoded::values`).
    pub rows_uncopied: AtomicU64,
    /// Nanoseconds the sink spent writing encoded spectra (and opening, flushing, closing).
    pub sink_ns: AtomicU64,
    /// Most batches the sink (or the averaging stage) held at once to put them back in order
    /// (bounded by the dispatcher's window).
    pub reorder_peak: AtomicU64,
    /// Frame-complete → written latency as cumulative buckets (for `/metrics`).
    pub latency: LatencyBuckets,
    /// Every pipeline thread's time by phase, start-up and teardown (`timeline`).
    pub times: crate::timeline::StageTimes,
}

/// Upper bounds in seconds of the latency buckets (Prometheus `le`), the last one +Inf.
pub(crate) const LATENCY_BOUNDS_S: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A latency histogram anyone can read while the sink writes it: counts per bucket (not
/// cumulative), the sum and the count. The sink adds a batch's frames at once (`LocalLatency`).
#[derive(Default)]
pub(crate) struct LatencyBuckets {
    /// One per bound, and one past the last.
    pub counts: [AtomicU64; LATENCY_BOUNDS_S.len() + 1],
    pub sum_ns: AtomicU64,
    pub count: AtomicU64,
}

/// A batch's latencies, bucketed without atomics, then added to `LatencyBuckets` in one go.
#[derive(Default)]
pub(crate) struct LocalLatency {
    counts: [u64; LATENCY_BOUNDS_S.len() + 1],
    sum_ns: u64,
    count: u64,
}

impl LocalLatency {
    /// `frames` frames, each of `latency`.
    pub(crate) fn record_n(&mut self, latency: Duration, frames: u64) {
        let s = latency.as_secs_f64();
        let bucket = LATENCY_BOUNDS_S
            .iter()
            .position(|&bound| s <= bound)
            .unwrap_or(LATENCY_BOUNDS_S.len());
        self.counts[bucket] += frames;
        self.sum_ns += latency.as_nanos() as u64 * frames;
        self.count += frames;
    }

    /// Adds what was recorded to `to` and starts again.
    pub(crate) fn flush(&mut self, to: &LatencyBuckets) {
        if self.count == 0 {
            return;
        }
        for (shared, local) in to.counts.iter().zip(&self.counts) {
            if *local > 0 {
                Counters::add(shared, *local);
            }
        }
        Counters::add(&to.sum_ns, self.sum_ns);
        Counters::add(&to.count, self.count);
        *self = LocalLatency::default();
    }
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
    /// Adds the time since `since` to a nanosecond counter.
    pub(crate) fn add_since(counter: &AtomicU64, since: Instant) {
        Self::add(counter, since.elapsed().as_nanos() as u64);
    }
    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
    /// Raises a high-water mark to `n`.
    pub(crate) fn raise(counter: &AtomicU64, n: u64) {
        counter.fetch_max(n, Ordering::Relaxed);
    }
}

/// Frame-complete → spectrum-written latency, in microseconds (1 µs .. 1 h, 3 significant digits).
pub(crate) struct Latency {
    histogram: Option<Histogram<u64>>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            histogram: Histogram::new_with_bounds(1, 3_600_000_000, 3).ok(),
        }
    }
}

impl Latency {
    /// `frames` frames, each of `latency`.
    pub(crate) fn record_n(&mut self, latency: Duration, frames: u64) {
        if let Some(h) = self.histogram.as_mut() {
            h.saturating_record_n((latency.as_micros() as u64).max(1), frames);
        }
    }

    /// (p50, p99, max) in milliseconds.
    pub(crate) fn summary_ms(&self) -> Option<(f64, f64, f64)> {
        let h = self.histogram.as_ref().filter(|h| !h.is_empty())?;
        let ms = |us: u64| us as f64 / 1000.0;
        Some((
            ms(h.value_at_quantile(0.50)),
            ms(h.value_at_quantile(0.99)),
            ms(h.max()),
        ))
    }
}

/// The `--stats` line.
pub(crate) fn report(counters: &Counters, latency: &Latency, started: Instant) -> String {
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let analysed = Counters::get(&counters.samples_analysed);
    let mut line = format!(
        "fftd stats: frames in {}, frames out {}, dropped {}, samples read {}, samples analysed {} ({:.3e} samples/s over {:.3} s)",
        Counters::get(&counters.frames_in),
        Counters::get(&counters.frames_out),
        Counters::get(&counters.dropped),
        Counters::get(&counters.samples_in),
        analysed,
        analysed as f64 / secs,
        secs
    );
    match latency.summary_ms() {
        Some((p50, p99, max)) => line.push_str(&format!(
            ", latency p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms"
        )),
        None => line.push_str(", latency n/a (no frames)"),
    }
    line
}

/// Threads of each stage, and the dispatcher's window, for `stages_report`.
pub(crate) struct StageThreads {
    pub readers: usize,
    pub workers: usize,
    pub encoders: usize,
    /// Batches that may be unfinished at once from the oldest one (`pipeline::dispatch`).
    pub window: u64,
}

/// The `--stats` line on stage times: each as a share of the run's wall time (the readers', the
/// engines' and the encoders' as a share of their thread count × wall time, an average per
/// thread). The sink's share is writing only; formatting is the encoders'. Last, the most batches
/// held to be put back in order, against the window that bounds them.
pub(crate) fn stages_report(
    counters: &Counters,
    threads: &StageThreads,
    started: Instant,
) -> String {
    let StageThreads {
        readers,
        workers,
        encoders,
        window,
    } = *threads;
    let wall = started.elapsed().as_nanos().max(1) as f64;
    let pct = |c: &AtomicU64, of: f64| 100.0 * Counters::get(c) as f64 / of;
    format!(
        "fftd stages: readers waited on the FFT stage {:.0}% ({} readers), batcher waited for a worker {:.0}%, FFT workers busy {:.0}% ({} workers), encoders busy {:.0}% ({} encoders; {} rows written from the spectra without a copy), sink writing {:.0}%, held for order at most {} batches (window {})",
        pct(&counters.reader_wait_ns, wall * readers.max(1) as f64),
        readers,
        pct(&counters.batcher_wait_ns, wall),
        pct(&counters.engine_ns, wall * workers.max(1) as f64),
        workers,
        pct(&counters.encode_ns, wall * encoders.max(1) as f64),
        encoders,
        Counters::get(&counters.rows_uncopied),
        pct(&counters.sink_ns, wall),
        Counters::get(&counters.reorder_peak),
        window
    )
}

/// One device's share of a run (a lane of the FFT stage), for `devices_report`.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeviceShare {
    /// "cpu", or "opencl:P:D (name)".
    pub title: String,
    /// The device's address (`Lane::address`): the instances of a device named twice share it.
    pub device: String,
    pub is_cpu: bool,
    /// FFT worker threads of the device.
    pub workers: usize,
    pub batches: u64,
    pub frames: u64,
    /// Nanoseconds its workers spent in their engines, summed over workers.
    pub busy_ns: u64,
    pub failed: bool,
    /// Batches it handed to other devices after failing.
    pub handed_off: u64,
    /// Frames an OpenCL device's workers computed on their CPU engines.
    pub cpu_frames: u64,
    /// Batches whose samples went to the device as f32, and whose rows came back as f32.
    pub f32_over_bus: (u64, u64),
    /// Its device's event times summed over its workers (`LaneCounters::device_ns`): uploads,
    /// kernels, downloads.
    pub device_ns: [u64; 3],
}

/// What the devices line calls a device's parts, in `device_ns`' order
/// (`timeline::Phase::DEVICE_PARTS`, whose stage names the bound gives).
const DEVICE_PART_NAMES: [&str; 3] = ["uploads", "kernels", "downloads"];

/// The bound `--stats` names on the devices' side, as a share of `wall_ns`: the busiest of any
/// one device's parts (its uploads, kernels or downloads as the events gave them, summed over
/// its workers, and over the instances of a device named twice, which share its link) and of
/// any device lane's workers (`fft`: their time in the engine per worker). A device's copies
/// and kernels are its own, not its workers' threads', so they count against the wall clock,
/// not per FFT worker thread, where a retired CPU lane's idle workers would thin them out.
/// Where the device's link bounds a run, its workers (two) spend most of their engine time
/// waiting for its copies, one worker's after the other's, so the copies' share of the wall
/// passes either worker's; where its workers bound it, theirs stands above the copies'. Two
/// queues' copies may overlap, so a part's share can pass 1.
pub(crate) fn device_bound(shares: &[DeviceShare], wall_ns: u64) -> Option<(&'static str, f64)> {
    let wall = wall_ns.max(1) as f64;
    let devices = shares.iter().filter(|s| !s.is_cpu);
    let mut parts: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    for lane in devices.clone() {
        let sums = parts.entry(lane.device.as_str()).or_default();
        (sums.iter_mut().zip(lane.device_ns)).for_each(|(sum, ns)| *sum += ns);
    }
    let part_shares = parts.into_values().flat_map(|sums| {
        let stages = Phase::DEVICE_PARTS.map(Phase::stage);
        (stages.into_iter().zip(sums)).filter_map(|(stage, ns)| Some((stage?, ns as f64 / wall)))
    });
    let workers = devices.map(|s| ("fft", s.busy_ns as f64 / (wall * s.workers.max(1) as f64)));
    (part_shares.chain(workers))
        .filter(|(_, busy)| *busy > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// ", on the device: uploads 0.171 s (10%), kernels …, downloads …": a device lane's event
/// times summed over its workers, and each as a share of the wall clock.
fn device_times(device_ns: &[u64; 3], wall: f64) -> String {
    let parts: Vec<String> = (DEVICE_PART_NAMES.iter().zip(device_ns))
        .map(|(name, &ns)| {
            let share = 100.0 * ns as f64 / wall;
            format!("{name} {:.3} s ({share:.0}%)", ns as f64 * 1e-9)
        })
        .collect();
    format!(", on the device: {}", parts.join(", "))
}

/// The `--stats` line on devices: each one's batches, frames (and share of all frames), busy
/// time (and share of its workers × wall time), and what became of its work if it failed.
/// `wall_ns`: the run's wall clock so far, as the bound takes it.
pub(crate) fn devices_report(shares: &[DeviceShare], wall_ns: u64) -> String {
    let wall = wall_ns.max(1) as f64;
    let total: u64 = shares.iter().map(|s| s.frames).sum();
    let parts: Vec<String> = shares
        .iter()
        .map(|s| {
            let mut part = format!(
                "{}: {} batches, {} frames ({:.1}%), busy {:.3} s ({:.0}% of {} worker{})",
                s.title,
                s.batches,
                s.frames,
                100.0 * s.frames as f64 / total.max(1) as f64,
                s.busy_ns as f64 * 1e-9,
                100.0 * s.busy_ns as f64 / (wall * s.workers.max(1) as f64),
                s.workers,
                if s.workers == 1 { "" } else { "s" }
            );
            if !s.is_cpu && s.cpu_frames > 0 {
                part.push_str(&format!(", {} frames on its CPU engines", s.cpu_frames));
            }
            if s.device_ns.iter().any(|&ns| ns > 0) {
                part.push_str(&device_times(&s.device_ns, wall));
            }
            let (up, down) = s.f32_over_bus;
            if up + down > 0 {
                part.push_str(&format!(
                    ", f32 over the bus: {up} batches' samples up, {down} batches' rows down"
                ));
            }
            if s.failed {
                part.push_str(&format!(
                    ", failed: {} batches handed to other devices",
                    s.handed_off
                ));
            }
            part
        })
        .collect();
    format!("fftd devices: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_devices_bound_is_a_devices_busiest_part_or_its_workers_against_the_wall() {
        let device = |label: &str, busy_ns, device_ns| DeviceShare {
            title: format!("{label} (dev)"),
            device: crate::fft::device_set::address_in_label(label).into(),
            workers: 2,
            busy_ns,
            device_ns,
            ..Default::default()
        };
        let cpu = DeviceShare {
            is_cpu: true,
            device_ns: [0, 900, 0], // not a device's: never the bound
            ..device("cpu", 1900, [0; 3])
        };
        // a link that bounds: two workers, each waiting in the engine mostly for downloads,
        // which together fill more of the wall than either worker's time
        let a = device("opencl:1:0", 1000, [100, 50, 700]);
        assert_eq!(
            device_bound(&[cpu.clone(), a.clone()], 1000),
            Some(("download", 0.7))
        );
        assert_eq!(device_bound(&[cpu], 1000), None);
        // workers that bound: in the engine 95 % of the wall, the link half of it
        let busy = device("opencl:1:1", 1900, [100, 50, 500]);
        assert_eq!(device_bound(&[a.clone(), busy], 1000), Some(("fft", 0.95)));
        // one device named twice: its instances share its link
        let twice = [
            device("opencl:1:1#1", 500, [0, 0, 400]),
            device("opencl:1:1#2", 500, [0, 0, 400]),
        ];
        assert_eq!(device_bound(&twice, 1000), Some(("download", 0.8)));
        let line = devices_report(&[a], 1_000_000_000);
        assert!(
            line.contains(", on the device: uploads 0.000 s (0%), kernels 0.000 s (0%), downloads 0.000 s (0%)"),
            "{line}"
        );
        let plain = devices_report(&[device("opencl:1:0", 0, [0; 3])], 1_000_000_000);
        assert!(!plain.contains("on the device"), "{plain}");
    }

    #[test]
    fn devices_line_gives_each_share_and_failures() {
        let a = DeviceShare {
            title: "opencl:0:0#1 (dev)".into(),
            workers: 1,
            batches: 3,
            frames: 300,
            ..Default::default()
        };
        let b = DeviceShare {
            title: "opencl:0:0#2 (dev)".into(),
            workers: 1,
            batches: 1,
            frames: 100,
            failed: true,
            handed_off: 2,
            f32_over_bus: (1, 0),
            ..Default::default()
        };
        let line = devices_report(&[a, b], 1_000_000_000);
        assert!(
            line.starts_with("fftd devices: opencl:0:0#1 (dev): 3 batches, 300 frames (75.0%)"),
            "{line}"
        );
        assert!(
            line.contains("opencl:0:0#2 (dev): 1 batches, 100 frames (25.0%)"),
            "{line}"
        );
        assert!(
            line.contains("failed: 2 batches handed to other devices"),
            "{line}"
        );
        let carried = "f32 over the bus: 1 batches' samples up, 0 batches' rows down";
        assert!(line.contains(carried), "{line}");
        assert_eq!(line.matches("over the bus").count(), 1, "{line}");
    }
}
