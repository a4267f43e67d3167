//! Live capture through cpal (`--mic [DEVICE]`), and the "Audio inputs" section of `fftd devices`.
//!
//! The audio callback converts whatever the device delivers (i8/i16/i24/i32/u8/u16/f32/f64 …) to
//! f32 in [-1, 1) straight into a preallocated lock-free SPSC ring (`rtrb`): it never blocks, never
//! allocates and never waits for the analysis. When the ring is full the callback's whole buffer is
//! lost; the loss is counted and recorded as a gap marker (stream position, samples lost) in a
//! second small ring, so `read()` stops exactly at the gap and `take_gap()` reports it before the
//! samples that follow it: the reader restarts framing there and frame timestamps (frame start
//! sample / rate) keep counting signal time. ALSA overruns (xruns) become gaps too, sized from the
//! capture timestamps.
//!
//! `read()` parks on a timed wait (woken by the callback) so a stop request is seen within 50 ms.
//! A stream error other than an xrun (device unplugged, …) is returned from `read()` as an error
//! once everything captured before it has been delivered.

use super::mic_device::{
    cannot_open, choose_config, device_id, format_name, pick_device, QuietAlsa,
};
use super::spec::SourceSpec;
use super::{SampleSource, SourceInfo};
use crate::error::{FftdError, Result};
use crate::types::InputKind;
use cpal::traits::{DeviceTrait, StreamTrait};
use cpal::{SampleFormat, SizedSample, StreamConfig, SupportedStreamConfigRange, I24, U24};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

/// Longest `read()` sleeps before it looks at the stop flag again.
const STOP_POLL: Duration = Duration::from_millis(50);
/// Callback period requested from the device, seconds (rounded up to a power of two of frames).
pub(super) const PERIOD_SECONDS: f64 = 0.01;
/// Seconds of audio the ring holds: what the analysis may fall behind before samples are lost.
const RING_SECONDS: f64 = 2.0;
/// Largest ring, in samples (64 MiB of f32): bounds memory for many-channel, high-rate devices.
const RING_MAX_VALUES: usize = 1 << 24;
/// Gap markers the ring of gaps holds; a gap that finds it full is merged into the next one.
const GAP_SLOTS: usize = 256;
/// Environment variable that forces the capture sample format (i16, f32, …): for tests and for
/// devices whose default format is not the wanted one.
pub(crate) const FORMAT_ENV: &str = crate::knobs::MIC_FORMAT;

/// `n` samples were lost just before stream sample frame `at`.
#[derive(Clone, Copy, Debug)]
struct Gap {
    at: u64,
    lost: u64,
}

/// State the callbacks and the reader share (all lock-free).
#[derive(Default)]
struct Shared {
    /// The reading thread, unparked by the callback when data arrives.
    waiter: OnceLock<Thread>,
    /// First fatal stream error (device gone, …).
    fatal: OnceLock<String>,
    /// Set by the error callback on an xrun; the next data callback sizes the gap.
    xrun: AtomicBool,
    /// Capture time of the first callback, ns since the stream's epoch (0: none yet).
    first_capture_ns: AtomicU64,
}

impl Shared {
    fn wake(&self) {
        if let Some(t) = self.waiter.get() {
            t.unpark();
        }
    }
}

/// The producer side, owned by the audio callback.
struct Capture {
    samples: rtrb::Producer<f32>,
    gaps: rtrb::Producer<Gap>,
    channels: usize,
    rate: f64,
    /// Sample frames written to the ring or lost, i.e. the stream position of the next frame.
    position: u64,
    /// Frames lost since the last gap marker was queued.
    pending_lost: u64,
    /// Capture timestamp and length of the previous callback (to size an xrun).
    last_capture: Option<(Duration, usize)>,
    shared: Arc<Shared>,
}

impl Capture {
    /// The data callback: convert and queue `data`, or count it lost. Never blocks or allocates.
    fn push<T: Copy>(&mut self, data: &[T], capture: Duration, convert: fn(T) -> f32) {
        let frames = data.len() / self.channels;
        let values = frames * self.channels;
        if self.last_capture.is_none() {
            let ns = (capture.as_nanos() as u64).max(1);
            self.shared.first_capture_ns.store(ns, Ordering::Relaxed);
        }
        if self.shared.xrun.swap(false, Ordering::Relaxed) {
            if let Some((prev, prev_frames)) = self.last_capture {
                let expected = prev + Duration::from_secs_f64(prev_frames as f64 / self.rate);
                let missing = capture.saturating_sub(expected).as_secs_f64() * self.rate;
                self.lose(missing.round() as u64);
            }
        }
        self.last_capture = Some((capture, frames));
        if self.samples.slots() < values {
            self.lose(frames as u64);
        } else if self.pending_lost > 0 && self.gaps.is_full() {
            // No room to say where the gap is: lose this buffer too, and say it later.
            self.lose(frames as u64);
        } else {
            if self.pending_lost > 0 {
                let gap = Gap {
                    at: self.position,
                    lost: self.pending_lost,
                };
                // Cannot fail: not full (checked above), and only this thread pushes.
                if self.gaps.push(gap).is_ok() {
                    self.position += self.pending_lost;
                    self.pending_lost = 0;
                }
            }
            if let Ok(chunk) = self.samples.write_chunk_uninit(values) {
                chunk.fill_from_iter(data[..values].iter().map(|&s| convert(s)));
                self.position += frames as u64;
            }
        }
        self.shared.wake();
    }

    fn lose(&mut self, frames: u64) {
        if frames > 0 {
            self.pending_lost += frames;
        }
    }
}

/// The consumer side of the rings: blocking reads that stop at gaps.
struct Ring {
    samples: rtrb::Consumer<f32>,
    gaps: rtrb::Consumer<Gap>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    channels: usize,
    /// Stream position of the next sample frame `read()` returns.
    position: u64,
    /// Frames lost before the data `read()` returns next, for `take_gap()`.
    gap: u64,
}

impl Ring {
    /// Waits for captured samples and appends up to `max_frames` sample frames (as f64) to
    /// `out`, never across a gap. `Ok(0)` once `stop` is set (seen within `STOP_POLL`); the
    /// stream's fatal error once everything captured before it has been read.
    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        let _ = self.shared.waiter.set(std::thread::current());
        let channels = self.channels;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            // Samples first, then markers: a marker is queued before the samples after it, so
            // every marker inside the samples seen here is seen too.
            let available = self.samples.slots() / channels;
            let mut limit = available;
            while let Ok(gap) = self.gaps.peek() {
                if gap.at > self.position {
                    limit = limit.min((gap.at - self.position) as usize);
                    break;
                }
                tracing::debug!(
                    "capture gap: {} frame(s) lost at frame {}",
                    gap.lost,
                    gap.at
                );
                self.gap += gap.lost;
                self.position += gap.lost;
                let _ = self.gaps.pop();
            }
            let n = limit.min(max_frames);
            if n > 0 {
                if let Ok(chunk) = self.samples.read_chunk(n * channels) {
                    let (a, b) = chunk.as_slices();
                    out.reserve(a.len() + b.len());
                    out.extend(a.iter().chain(b).map(|&v| f64::from(v)));
                    chunk.commit_all();
                    self.position += n as u64;
                    return Ok(n);
                }
            }
            if available == 0 {
                if let Some(message) = self.shared.fatal.get() {
                    return Err(FftdError::Runtime(message.clone()));
                }
            }
            std::thread::park_timeout(STOP_POLL);
        }
    }
}

/// A live capture as a `SampleSource`.
pub(crate) struct MicSource {
    info: SourceInfo,
    ring: Ring,
    logged_start: bool,
    /// Kept alive for the capture; dropping the source stops it.
    _stream: cpal::Stream,
}

impl SampleSource for MicSource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        let got = self.ring.read(out, max_frames)?;
        if !self.logged_start {
            self.logged_start = true;
            let ns = self.ring.shared.first_capture_ns.load(Ordering::Relaxed);
            tracing::debug!(
                "{}: first buffer captured at {:.6} s of the stream clock",
                self.info.name,
                ns as f64 * 1e-9
            );
        }
        Ok(got)
    }

    fn take_gap(&mut self) -> u64 {
        std::mem::take(&mut self.ring.gap)
    }
}

/// Opens `device` ("" = the default input; else an index or name substring from `fftd devices`)
/// and starts capturing. `--rate` and `--channels` request a configuration; the device's default
/// fills in what is not given.
pub(crate) fn open(
    device: &str,
    spec: &SourceSpec,
    stop: Arc<AtomicBool>,
) -> Result<Box<dyn SampleSource>> {
    let _quiet = QuietAlsa::install();
    let host = cpal::default_host();
    let dev = pick_device(&host, device)?;
    let id = device_id(&dev);
    let ranges: Vec<SupportedStreamConfigRange> = match dev.supported_input_configs() {
        Ok(r) => r.collect(),
        Err(e) => return Err(cannot_open(device, &id, &e.to_string(), &_quiet)),
    };
    if ranges.is_empty() {
        return Err(cannot_open(
            device,
            &id,
            "it offers no capture configuration",
            &_quiet,
        ));
    }
    let default = dev.default_input_config().ok();
    let (config, format) = choose_config(&id, &ranges, default.as_ref(), spec)?;
    let channels = usize::from(config.channels);
    let rate = f64::from(config.sample_rate);

    let started = match start(&dev, &config, format, &id) {
        Err(e) if config.buffer_size != cpal::BufferSize::Default => {
            tracing::debug!("'{id}': {e}; retrying with the device's default period");
            let config = StreamConfig {
                buffer_size: cpal::BufferSize::Default,
                ..config
            };
            start(&dev, &config, format, &id)
        }
        other => other,
    };
    let (stream, samples_rx, gaps_rx, shared) = started.map_err(|e| {
        FftdError::Runtime(format!("audio input '{id}': cannot start capture: {e}"))
    })?;
    let period = stream
        .buffer_size()
        .map(|b| format!(", {b}-frame periods"))
        .unwrap_or_default();
    tracing::info!(
        "capturing from '{id}': {}, {channels} channel(s), {} Hz{period}",
        format_name(format),
        config.sample_rate
    );
    Ok(Box::new(MicSource {
        info: SourceInfo {
            name: format!("mic:{id}"),
            rate,
            channels,
            kind: InputKind::Real,
            live: true,
        },
        ring: Ring {
            samples: samples_rx,
            gaps: gaps_rx,
            shared,
            stop,
            channels,
            position: 0,
            gap: 0,
        },
        logged_start: false,
        _stream: stream,
    }))
}

/// The capture side of a running stream: the stream and the consumer ends of its rings.
type Started = (
    cpal::Stream,
    rtrb::Consumer<f32>,
    rtrb::Consumer<Gap>,
    Arc<Shared>,
);

/// Allocates the rings (`RING_SECONDS` of audio, at most `RING_MAX_VALUES`), builds the stream
/// and starts it.
fn start(
    dev: &cpal::Device,
    config: &StreamConfig,
    format: SampleFormat,
    id: &str,
) -> std::result::Result<Started, String> {
    let channels = usize::from(config.channels);
    let rate = f64::from(config.sample_rate);
    let capacity = (((rate * RING_SECONDS) as usize).max(1 << 14) * channels).min(RING_MAX_VALUES);
    let (samples_tx, samples_rx) = rtrb::RingBuffer::new(capacity);
    let (gaps_tx, gaps_rx) = rtrb::RingBuffer::new(GAP_SLOTS);
    let shared = Arc::new(Shared::default());
    let capture = Capture {
        samples: samples_tx,
        gaps: gaps_tx,
        channels,
        rate,
        position: 0,
        pending_lost: 0,
        last_capture: None,
        shared: shared.clone(),
    };
    let stream = build_stream(dev, config, format, capture, id)?;
    stream.play().map_err(|e| e.to_string())?;
    Ok((stream, samples_rx, gaps_rx, shared))
}

/// The stream for `format`, each sample converted to f32 in [-1, 1).
fn build_stream(
    dev: &cpal::Device,
    config: &StreamConfig,
    format: SampleFormat,
    capture: Capture,
    id: &str,
) -> std::result::Result<cpal::Stream, String> {
    use convert as c;
    match format {
        SampleFormat::I8 => build::<i8>(dev, config, capture, id, c::i8),
        SampleFormat::I16 => build::<i16>(dev, config, capture, id, c::i16),
        SampleFormat::I24 => build::<I24>(dev, config, capture, id, c::i24),
        SampleFormat::I32 => build::<i32>(dev, config, capture, id, c::i32),
        SampleFormat::I64 => build::<i64>(dev, config, capture, id, c::i64),
        SampleFormat::U8 => build::<u8>(dev, config, capture, id, c::u8),
        SampleFormat::U16 => build::<u16>(dev, config, capture, id, c::u16),
        SampleFormat::U24 => build::<U24>(dev, config, capture, id, c::u24),
        SampleFormat::U32 => build::<u32>(dev, config, capture, id, c::u32),
        SampleFormat::U64 => build::<u64>(dev, config, capture, id, c::u64),
        SampleFormat::F32 => build::<f32>(dev, config, capture, id, c::f32),
        SampleFormat::F64 => build::<f64>(dev, config, capture, id, c::f64),
        other => Err(format!("sample format {other} is not supported by fftd")),
    }
}

/// Device samples to f32 in [-1, 1): signed integers divided by 2^(bits-1), unsigned ones
/// centred first; 32- and 64-bit integers keep their top 24 bits (all an f32 holds), so the
/// result stays below 1.
mod convert {
    use cpal::{I24, U24};

    const TWO_23: f32 = 8_388_608.0;

    pub(super) fn i8(s: i8) -> f32 {
        f32::from(s) / 128.0
    }
    pub(super) fn i16(s: i16) -> f32 {
        f32::from(s) / 32768.0
    }
    pub(super) fn i24(s: I24) -> f32 {
        s.inner() as f32 / TWO_23
    }
    pub(super) fn i32(s: i32) -> f32 {
        (s >> 8) as f32 / TWO_23
    }
    pub(super) fn i64(s: i64) -> f32 {
        (s >> 40) as f32 / TWO_23
    }
    pub(super) fn u8(s: u8) -> f32 {
        (f32::from(s) - 128.0) / 128.0
    }
    pub(super) fn u16(s: u16) -> f32 {
        (f32::from(s) - 32768.0) / 32768.0
    }
    pub(super) fn u24(s: U24) -> f32 {
        (s.inner() - 8_388_608) as f32 / TWO_23
    }
    pub(super) fn u32(s: u32) -> f32 {
        i32((s ^ 0x8000_0000) as i32)
    }
    pub(super) fn u64(s: u64) -> f32 {
        i64((s ^ (1 << 63)) as i64)
    }
    pub(super) fn f32(s: f32) -> f32 {
        s
    }
    pub(super) fn f64(s: f64) -> f32 {
        s as f32
    }
}

fn build<T: SizedSample + Copy + Send + 'static>(
    dev: &cpal::Device,
    config: &StreamConfig,
    mut capture: Capture,
    id: &str,
    convert: fn(T) -> f32,
) -> std::result::Result<cpal::Stream, String> {
    let shared = capture.shared.clone();
    let name = id.to_string();
    let on_error = move |e: cpal::Error| {
        if e.kind() == cpal::ErrorKind::Xrun {
            // Error path only (not per buffer): logging may allocate here.
            tracing::debug!("{name}: overrun reported by the device");
            shared.xrun.store(true, Ordering::Relaxed);
            return;
        }
        let what = if e.kind() == cpal::ErrorKind::DeviceNotAvailable {
            "capture stopped, the device is gone"
        } else {
            "capture failed"
        };
        let _ = shared
            .fatal
            .set(format!("audio input '{name}': {what}: {e}"));
        shared.wake();
    };
    let on_data = move |data: &[T], info: &cpal::InputCallbackInfo| {
        let capture_time = info.timestamp().capture.as_nanos();
        capture.push(data, Duration::from_nanos(capture_time as u64), convert);
    };
    dev.build_input_stream::<T, _, _>(*config, on_data, on_error, Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::mic_device::compress_runs;

    #[test]
    fn integer_conversions_span_minus_one_to_one() {
        use convert as c;
        assert_eq!((c::i8(i8::MIN), c::u8(0), c::u8(128)), (-1.0, -1.0, 0.0));
        assert_eq!(
            (c::i16(i16::MIN), c::u16(0), c::u16(32768)),
            (-1.0, -1.0, 0.0)
        );
        assert_eq!(c::i16(16384), 0.5);
        assert_eq!(c::i32(i32::MIN), -1.0);
        assert_eq!((c::u32(0), c::u32(0x8000_0000)), (-1.0, 0.0));
        assert_eq!((c::i64(i64::MIN), c::u64(0)), (-1.0, -1.0));
        let min24 = I24::new(-8_388_608).expect("in range");
        let zero_u24 = U24::new(8_388_608).expect("in range");
        assert_eq!((c::i24(min24), c::u24(zero_u24)), (-1.0, 0.0));
        let tops = [
            c::i8(i8::MAX),
            c::u8(u8::MAX),
            c::i16(i16::MAX),
            c::u16(u16::MAX),
            c::i32(i32::MAX),
            c::u32(u32::MAX),
            c::i64(i64::MAX),
            c::u64(u64::MAX),
        ];
        assert!(tops.iter().all(|&t| t < 1.0 && t > 0.99), "{tops:?}");
    }

    #[test]
    fn runs_are_compressed() {
        assert_eq!(compress_runs(&[1, 2, 4, 6, 7, 8]), "1-2, 4, 6-8");
        assert_eq!(compress_runs(&[2]), "2");
    }

    fn pair(capacity: usize, channels: usize, gap_slots: usize) -> (Capture, Ring) {
        let (stx, srx) = rtrb::RingBuffer::new(capacity);
        let (gtx, grx) = rtrb::RingBuffer::new(gap_slots);
        let shared = Arc::new(Shared::default());
        let capture = Capture {
            samples: stx,
            gaps: gtx,
            channels,
            rate: 48000.0,
            position: 0,
            pending_lost: 0,
            last_capture: None,
            shared: shared.clone(),
        };
        let ring = Ring {
            samples: srx,
            gaps: grx,
            shared,
            stop: Arc::new(AtomicBool::new(false)),
            channels,
            position: 0,
            gap: 0,
        };
        (capture, ring)
    }

    fn push(capture: &mut Capture, values: &[i16]) {
        capture.push(values, Duration::ZERO, f32::from);
    }

    #[test]
    fn overflow_is_reported_as_a_gap_before_the_samples_after_it() {
        let (mut cap, mut ring) = pair(8, 2, 4);
        push(&mut cap, &[1, 1, 2, 2]);
        push(&mut cap, &[3, 3, 4, 4]);
        push(&mut cap, &[5, 5, 6, 6]); // ring full: 2 frames lost
        let mut out = Vec::new();
        assert_eq!(ring.read(&mut out, 100).ok(), Some(4));
        assert_eq!(out, [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
        assert_eq!(ring.gap, 0);
        push(&mut cap, &[7, 7]);
        out.clear();
        assert_eq!(ring.read(&mut out, 100).ok(), Some(1));
        assert_eq!(out, [7.0, 7.0]);
        assert_eq!(std::mem::take(&mut ring.gap), 2);
        assert_eq!((ring.position, cap.position), (7, 7));
    }

    #[test]
    fn a_read_stops_at_a_gap() {
        let (mut cap, mut ring) = pair(8, 1, 4);
        push(&mut cap, &[0, 1, 2, 3]);
        push(&mut cap, &[4, 5, 6, 7]);
        push(&mut cap, &[8, 9]); // lost
        let mut out = Vec::new();
        assert_eq!(ring.read(&mut out, 3).ok(), Some(3));
        push(&mut cap, &[10]); // after the gap
        out.clear();
        assert_eq!(ring.read(&mut out, 100).ok(), Some(5));
        assert_eq!(out, [3.0, 4.0, 5.0, 6.0, 7.0]);
        assert_eq!(ring.gap, 0, "the gap comes after these samples");
        out.clear();
        assert_eq!(ring.read(&mut out, 100).ok(), Some(1));
        assert_eq!(out, [10.0]);
        assert_eq!(ring.gap, 2);
    }

    /// Whatever the interleaving of callbacks and reads, every sample read sits at its own
    /// stream position once the reported gaps are added, and nothing goes missing unreported.
    #[test]
    fn positions_survive_any_interleaving() {
        let (mut cap, mut ring) = pair(5, 1, 2);
        let mut rng = 0x2545_f491_u32;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            rng
        };
        let (mut pushed, mut expected, mut read) = (0i16, 0i64, 0u64);
        let mut out = Vec::new();
        for _ in 0..5000 {
            if next() % 2 == 0 {
                let n = 1 + (next() % 3) as i16;
                let values: Vec<i16> = (pushed..pushed + n).collect();
                push(&mut cap, &values);
                pushed += n;
            } else if ring.samples.slots() > 0 {
                out.clear();
                let got = ring
                    .read(&mut out, 1 + (next() % 3) as usize)
                    .expect("read");
                expected += std::mem::take(&mut ring.gap) as i64;
                for &v in &out {
                    assert_eq!(v as i64, expected);
                    expected += 1;
                }
                read += got as u64;
            }
            if pushed > 30000 {
                break;
            }
        }
        while ring.samples.slots() > 0 {
            out.clear();
            read += ring.read(&mut out, 100).expect("read") as u64;
            expected += std::mem::take(&mut ring.gap) as i64;
            expected += out.len() as i64;
        }
        assert!(
            read > 100 && (read as i64) < expected,
            "some lost, most read"
        );
        assert_eq!(expected as u64 + cap.pending_lost, pushed as u64);
    }

    #[test]
    fn an_overrun_becomes_a_gap_sized_from_capture_times() {
        let (mut cap, mut ring) = pair(64, 1, 4);
        let period = Duration::from_secs_f64(4.0 / 48000.0);
        cap.push(&[0i16, 1, 2, 3], Duration::ZERO, f32::from);
        cap.shared.xrun.store(true, Ordering::Relaxed);
        // The device lost 8 frames: the next buffer was captured 3 periods after the first.
        cap.push(&[12i16, 13, 14, 15], period * 3, f32::from);
        let mut out = Vec::new();
        assert_eq!(ring.read(&mut out, 100).ok(), Some(4));
        assert_eq!(ring.gap, 0);
        out.clear();
        assert_eq!(ring.read(&mut out, 100).ok(), Some(4));
        assert_eq!(out, [12.0, 13.0, 14.0, 15.0]);
        assert_eq!(ring.gap, 8);
    }

    #[test]
    fn stop_ends_a_blocked_read_promptly() {
        let (_cap, mut ring) = pair(8, 1, 4);
        let stop = ring.stop.clone();
        let started = std::time::Instant::now();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            stop.store(true, Ordering::Relaxed);
        });
        let mut out = Vec::new();
        assert_eq!(ring.read(&mut out, 100).ok(), Some(0));
        let waited = started.elapsed();
        assert!(
            waited < Duration::from_millis(100) + STOP_POLL * 3,
            "{waited:?}"
        );
        let _ = setter.join();
    }

    #[test]
    fn a_stream_error_comes_after_the_captured_samples() {
        let (mut cap, mut ring) = pair(8, 1, 4);
        push(&mut cap, &[1, 2]);
        let _ = ring
            .shared
            .fatal
            .set("audio input 'x': capture stopped".into());
        let mut out = Vec::new();
        assert_eq!(ring.read(&mut out, 100).ok(), Some(2));
        let err = ring.read(&mut out, 100).expect_err("the stream error");
        assert!(err.to_string().contains("capture stopped"));
    }
}
