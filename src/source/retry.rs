//! `--retry POLICY` (issue 27): a live input that fails is reopened instead of ending the run.
//!
//! `RetrySource` wraps the microphone, an `rtl_tcp://` receiver or a named FIFO (also stdin
//! redirected from one). When its source fails (an error: the device gone, the server gone) or
//! ends (a FIFO's writer went away), it waits 0.5 s, 1 s, 2 s … (at most 30 s) between attempts
//! to open it again, for as long as the policy allows (`retry_policy`). A FIFO's attempt waits
//! for a new writer. The outage ends when the reopened source delivers samples; then
//!
//! - its wall-clock length, in samples at the input's rate, is `take_outage()`: the reader
//!   restarts framing that many samples on, so frame numbers continue and row times jump by the
//!   length of the outage (rows stay on the wall clock);
//! - one `gap` event per stream goes to `--events`, the counters to `/metrics` (`outages`), and
//!   the log says so (a warning at the failure, a line when it resumes).
//!
//! The reopened input must have the shape it had (rate, channels, real or complex). The run's
//! stop request ends the wait at once; a policy that gives up ends the input with an error
//! naming it, its attempts and the last failure.

use super::outages::{outages, Gap, Outages};
use super::retry_policy::RetryPolicy;
use super::{SampleSource, SourceInfo};
use crate::error::{FftdError, Result};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How often a wait looks at the stop request and the policy's deadline.
const POLL: Duration = Duration::from_millis(50);

/// Opens the input again; the flag given is to end its reads (the run's stop, or the policy's
/// time running out).
pub(crate) type Reopen = Box<dyn FnMut(&Arc<AtomicBool>) -> Result<Box<dyn SampleSource>> + Send>;

/// The run's stop request and the policy's deadline, watched for the reopened sources.
struct Watch {
    stop: Arc<AtomicBool>,
    /// Set when the run stops or the deadline passes: the flag reopened sources are given.
    halt: Arc<AtomicBool>,
    deadline: Mutex<Option<Instant>>,
}

impl Watch {
    /// A thread that sets `halt` when the run stops or the deadline passes; it ends with the
    /// source.
    fn start(stop: &Arc<AtomicBool>) -> Arc<Watch> {
        let watch = Arc::new(Watch {
            stop: stop.clone(),
            halt: Arc::new(AtomicBool::new(false)),
            deadline: Mutex::new(None),
        });
        let weak: Weak<Watch> = Arc::downgrade(&watch);
        std::thread::spawn(move || {
            while let Some(watch) = weak.upgrade() {
                let late = watch
                    .deadline
                    .lock()
                    .is_ok_and(|d| d.is_some_and(|d| Instant::now() >= d));
                if watch.stop.load(Ordering::Relaxed) || late {
                    watch.halt.store(true, Ordering::Relaxed);
                    return;
                }
                drop(watch);
                std::thread::sleep(POLL);
            }
        });
        watch
    }

    fn set_deadline(&self, at: Option<Instant>) {
        if let Ok(mut d) = self.deadline.lock() {
            *d = at;
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A source that is reopened when it fails (see the module comment).
pub(crate) struct RetrySource {
    inner: Box<dyn SampleSource>,
    info: SourceInfo,
    reopen: Reopen,
    policy: RetryPolicy,
    watch: Arc<Watch>,
    streams: Range<usize>,
    /// Sample frames of stream time so far: delivered, and the outages' lengths.
    position: u64,
    /// Sample frames of the last outage, for `take_outage`.
    outage: u64,
    /// A retune that failed (the connection went): the next read reopens the input.
    failed_retune: Option<String>,
    log: &'static Outages,
}

/// `source` reopened by `reopen` when it fails, when `policy` is given; else `source` itself.
/// `streams`: the streams it feeds (their gap events and counters).
pub(crate) fn wrap(
    source: Box<dyn SampleSource>,
    policy: Option<RetryPolicy>,
    streams: Range<usize>,
    stop: &Arc<AtomicBool>,
    reopen: Reopen,
) -> Box<dyn SampleSource> {
    let Some(policy) = policy else {
        return source;
    };
    let log = outages();
    log.register(streams.clone());
    Box::new(RetrySource {
        info: source.info().clone(),
        inner: source,
        reopen,
        policy,
        watch: Watch::start(stop),
        streams,
        position: 0,
        outage: 0,
        failed_retune: None,
        log,
    })
}

/// How an outage ended.
enum Recovered {
    /// Samples flow again: this many were appended.
    Samples(usize),
    /// The run was stopped meanwhile.
    Stopped,
}

impl SampleSource for RetrySource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        let read = match self.failed_retune.take() {
            Some(failure) => Err(FftdError::input(&self.info.name, failure)),
            None => self.inner.read(out, max_frames),
        };
        let failure = match read {
            Ok(n) if n > 0 => {
                self.position += n as u64;
                return Ok(n);
            }
            _ if self.watch.stopping() => return Ok(0),
            Ok(_) => "the input ended (its writer went away)".to_string(),
            Err(e) => e.to_string(),
        };
        match self.recover(failure, out, max_frames)? {
            Recovered::Samples(n) => Ok(n),
            Recovered::Stopped => Ok(0),
        }
    }

    fn take_gap(&mut self) -> u64 {
        self.inner.take_gap()
    }

    fn take_outage(&mut self) -> u64 {
        std::mem::take(&mut self.outage)
    }

    fn take_decode_ns(&mut self) -> u64 {
        self.inner.take_decode_ns()
    }

    fn tuning(&self) -> Option<Arc<crate::types::tuning::Tuning>> {
        self.inner.tuning()
    }

    /// A retune the connection could not carry is a failure the next read recovers from.
    fn retune(&mut self, hz: f64) -> Result<()> {
        match self.inner.retune(hz) {
            Err(FftdError::Input { what, .. }) => {
                self.failed_retune = Some(what);
                Ok(())
            }
            other => other,
        }
    }
}

/// What a failed input is while it is reopened: nothing.
struct Closed(SourceInfo);

impl SampleSource for Closed {
    fn info(&self) -> &SourceInfo {
        &self.0
    }

    fn read(&mut self, _out: &mut Vec<f64>, _max_frames: usize) -> Result<usize> {
        Ok(0)
    }
}

impl RetrySource {
    /// Reopens the input until samples flow again, the run stops, or the policy gives up.
    fn recover(&mut self, failure: String, out: &mut Vec<f64>, max: usize) -> Result<Recovered> {
        let began = Instant::now();
        // (the outage began when the input last sent something: a silence before the error too)
        let outage_began = began.checked_sub(self.inner.silent_for()).unwrap_or(began);
        // the failed input is closed first: a device opens once at a time, and a driver may
        // close what its old handle still names
        self.inner = Box::new(Closed(self.info.clone()));
        let name = self.info.name.clone();
        let policy = self.policy;
        tracing::warn!(
            input = %name,
            "{name}: {failure}; reopening it (--retry {policy})"
        );
        self.watch
            .set_deadline(policy.time_left(Duration::ZERO).map(|d| began + d));
        let mut attempts = 0u32;
        let mut last = failure.clone();
        loop {
            let wait = RetryPolicy::wait(attempts + 1);
            if !policy.allows(attempts, began.elapsed(), wait) {
                self.note_gap(outage_began, attempts, &failure, false);
                return Err(FftdError::input(
                    &name,
                    format!(
                        "gave up after {attempts} attempt(s) in {:.1} s (--retry {policy}): {last}",
                        began.elapsed().as_secs_f64()
                    ),
                ));
            }
            if !self.sleep(wait) {
                self.note_gap(outage_began, attempts, &failure, false);
                return Ok(Recovered::Stopped);
            }
            attempts += 1;
            self.log.attempt();
            match self.attempt(out, max) {
                // the policy's time ran out as samples came: the reopened input is halted
                Ok(_) if self.watch.halt.load(Ordering::Relaxed) && !self.watch.stopping() => {
                    last = "the --retry time ran out as it came back".into();
                }
                Ok(n) => {
                    self.watch.set_deadline(None);
                    self.note_gap(outage_began, attempts, &failure, true);
                    self.position += n as u64;
                    return Ok(Recovered::Samples(n));
                }
                Err(_) if self.watch.stopping() => {
                    self.note_gap(outage_began, attempts, &failure, false);
                    return Ok(Recovered::Stopped);
                }
                Err(e) => {
                    tracing::debug!(input = %name, attempt = attempts, "reopening failed: {e}");
                    last = e;
                }
            }
        }
    }

    /// One attempt: the input opened again and its first samples read (appended to `out`).
    fn attempt(&mut self, out: &mut Vec<f64>, max: usize) -> std::result::Result<usize, String> {
        let mut source = (self.reopen)(&self.watch.halt).map_err(|e| e.to_string())?;
        let (was, now) = (&self.info, source.info());
        if now.rate != was.rate || now.channels != was.channels || now.kind != was.kind {
            return Err(format!(
                "it came back as {} Hz, {} channel(s), {:?}; it was {} Hz, {} channel(s), {:?}",
                now.rate, now.channels, now.kind, was.rate, was.channels, was.kind
            ));
        }
        match source.read(out, max) {
            Ok(0) => Err("it was opened but ended before any sample came".into()),
            Ok(n) => {
                self.inner = source;
                Ok(n)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Waits `wait`; false when the run stopped meanwhile.
    fn sleep(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        while !self.watch.stopping() {
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(POLL));
        }
        false
    }

    /// The outage that began at `began` is over: its length goes into stream time, its event
    /// and counters to the record, and a line to the log.
    fn note_gap(&mut self, began: Instant, attempts: u32, failure: &str, resumed: bool) {
        let gap_s = began.elapsed().as_secs_f64();
        let gap = Gap {
            input: self.info.name.clone(),
            streams: self.streams.clone(),
            time_s: self.position as f64 / self.info.rate,
            gap_s,
            attempts,
            error: failure.to_string(),
            resumed,
        };
        if resumed {
            let lost = (gap_s * self.info.rate).round() as u64;
            self.outage += lost;
            self.position += lost;
            tracing::info!(
                input = %gap.input,
                time_s = gap.time_s,
                gap_s,
                attempts,
                "{}: resumed after {gap_s:.3} s ({attempts} attempt(s))",
                gap.input
            );
        }
        self.log.gap(&gap);
    }
}

/// Reopens a named FIFO (or what stdin was redirected from, `stdin_fifo`) and reads it as
/// before: its format, rate and channels from `opts`; its reads end on the flag given.
pub(crate) fn reopen_stream(
    path: &str,
    opened: std::path::PathBuf,
    opts: &super::FileOptions,
) -> Reopen {
    let (path, opts) = (path.to_string(), opts.clone());
    Box::new(move |halt| {
        let opts = super::FileOptions {
            stop: halt.clone(),
            ..opts.clone()
        };
        let reader =
            super::input::InputReader::stream_path(&opened.to_string_lossy(), halt.clone());
        super::open_with_reader(&path, reader, &opts)
    })
}

/// The named FIFO stdin was redirected from (`fftd - < FIFO`), which a new writer can open
/// again; None for a shell pipe (no one can open it again), a file or a terminal.
pub(crate) fn stdin_fifo() -> Option<std::path::PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let target = std::fs::read_link("/proc/self/fd/0").ok()?;
    let meta = std::fs::metadata(&target).ok()?;
    (target.is_absolute() && meta.file_type().is_fifo()).then_some(target)
}

/// Where a stream input `path` is opened again: the FIFO itself, or stdin's (`stdin_fifo`);
/// None when it cannot be (a shell pipe, a device, a socket), with a warning under `--retry`.
pub(crate) fn reopenable(path: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let found = match path {
        "-" => stdin_fifo(),
        p => std::fs::metadata(p)
            .is_ok_and(|m| m.file_type().is_fifo())
            .then(|| std::path::PathBuf::from(p)),
    };
    if found.is_none() {
        tracing::warn!(
            "--retry: {path} is not a named FIFO; it is read once and not reopened at its end"
        );
    }
    found
}

/// Opens the microphone `device` again as `spec` asks.
pub(crate) fn reopen_mic(device: &str, spec: &super::spec::SourceSpec) -> Reopen {
    let (device, spec) = (device.to_string(), spec.clone());
    Box::new(move |halt| super::mic::open(&device, &spec, halt.clone()))
}

/// Opens a SoapySDR device again with the same request.
pub(crate) fn reopen_soapy(url: &str, request: super::soapy::Request) -> Reopen {
    let url = url.to_string();
    Box::new(move |halt| super::soapy::open(&url, request, halt.clone()).map(|s| Box::new(s) as _))
}

/// Connects to the rtl_tcp server `url` again and tunes it as before.
pub(crate) fn reopen_rtl_tcp(url: &str, tuning: super::rtl_tcp::Tuning) -> Reopen {
    let url = url.to_string();
    Box::new(move |halt| super::rtl_tcp::open(&url, tuning, halt.clone()).map(|s| Box::new(s) as _))
}
