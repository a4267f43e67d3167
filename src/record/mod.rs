//! Triggered recordings (`--record-on-alert DIR --pre DURATION --post DURATION`, issue 27): the
//! raw samples around each alert, from `pre` before its start to `post` after its end, as a
//! 32-bit float WAV (SigMF `cf32_le` for I/Q input) in DIR named by the start's time (UTC), the
//! rule and the stream: `20261125T170721.500Z_hum_s0.wav`. The samples before the start come from
//! a bounded ring (`tap`); an alert that starts again inside the post-roll extends the same file.
//! A recording holds every channel of its stream's input. Inputs are read in order (not by range
//! readers) while recording.

pub(crate) mod tap;
pub(crate) mod writer;

use crate::alerts::events::Event;
use crate::alerts::state::Change;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tap::{Active, Ring};
use writer::{SampleWriter, Shape};

/// The recording options of a run (plain values).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordOptions {
    pub dir: PathBuf,
    /// Seconds before the start and after the end.
    pub pre: f64,
    pub post: f64,
}

/// Checks `--record-on-alert`, `--pre` and `--post` (usage errors' messages).
pub(crate) fn check_record(
    dir: Option<&std::path::Path>,
    pre: Option<&str>,
    post: Option<&str>,
    have_rules: bool,
) -> Result<Option<RecordOptions>, String> {
    let seconds = |flag: &str, v: Option<&str>| -> Result<f64, String> {
        match v {
            None => Ok(0.0),
            Some(t) => crate::types::duration::seconds(t, false)
                .filter(|s| *s <= 3600.0)
                .ok_or_else(|| {
                    format!("{flag} {t}: expected a duration up to 1h, such as 500ms or 2s")
                }),
        }
    };
    let given = pre.is_some() || post.is_some();
    let (pre, post) = (seconds("--pre", pre)?, seconds("--post", post)?); // (values first)
    let Some(dir) = dir else {
        if given {
            return Err("--pre/--post: give --record-on-alert DIR to record".into());
        }
        return Ok(None);
    };
    if !have_rules {
        return Err("--record-on-alert: give the rules that trigger it with --alert RULE".into());
    }
    if !dir.is_dir() {
        let what = match dir.exists() {
            true => "not a directory",
            false => "no such directory",
        };
        return Err(format!(
            "--record-on-alert {}: {what}",
            crate::types::shown_path(dir)
        ));
    }
    Ok(Some(RecordOptions {
        dir: dir.to_path_buf(),
        pre,
        post,
    }))
}

/// One tapped source: its ring and the streams it feeds.
struct Tapped {
    ring: Arc<Mutex<Ring>>,
    first_stream: usize,
    streams: usize,
    shape: Shape,
    /// Per stream, the sample frame of the last row the sink saw (0 before its first).
    seen: Vec<u64>,
}

impl Tapped {
    fn feeds(&self, stream: usize) -> bool {
        (self.first_stream..self.first_stream + self.streams).contains(&stream)
    }
}

/// The sink's side: opens, extends and ends recordings as events come.
pub(crate) struct Recorder {
    options: RecordOptions,
    /// Seconds since 1970 of sample 0 (names the files).
    epoch_s: f64,
    sources: Vec<Tapped>,
    /// Each ring's share of `tap::RING_LEAD_VALUES` (set by `check_memory`).
    lead: usize,
}

impl Recorder {
    pub(crate) fn new(options: RecordOptions, epoch_s: f64) -> Self {
        Recorder {
            options,
            epoch_s,
            sources: Vec::new(),
            lead: tap::RING_LEAD_VALUES,
        }
    }

    /// Values per sample frame of `info`'s ring, and the frames it holds at least: `--pre`,
    /// `--post` and the tap's lag (`tap::LAG_S`).
    fn ring_size(&self, info: &crate::source::SourceInfo) -> (usize, f64) {
        let complex = info.kind == crate::types::InputKind::Complex;
        let width = info.channels * if complex { 2 } else { 1 };
        let frames = ((self.options.pre + self.options.post + tap::LAG_S) * info.rate).ceil();
        (width, frames)
    }

    /// A real input is recorded as WAV, whose header holds a whole number of Hz, bytes per
    /// second in 32 bits and per sample frame in 16: another rate or channel count is a usage
    /// error naming the input (I/Q goes to SigMF, which holds any rate).
    pub(crate) fn check_wav_rates<'a>(
        &self,
        mut sources: impl Iterator<Item = &'a crate::source::SourceInfo>,
    ) -> Result<(), String> {
        let wav_cannot_hold = |info: &crate::source::SourceInfo| {
            let (width, _) = self.ring_size(info);
            let bytes_per_s = info.rate * 4.0 * width as f64;
            let real = info.kind == crate::types::InputKind::Real;
            // (and bytes per sample frame in 16 bits)
            let wide = 4 * width > u16::MAX as usize;
            real && (info.rate.fract() != 0.0
                || info.rate < 1.0
                || bytes_per_s > u32::MAX as f64
                || wide)
        };
        match sources.find(|info| wav_cannot_hold(info)) {
            Some(info) => Err(format!(
                "--record-on-alert: {} at {} Hz, {} channel(s): a WAV recording holds a whole number of Hz from 1 to {}, and at most {} channels",
                info.name,
                crate::types::shown(info.rate),
                info.channels,
                u32::MAX as usize / (4 * info.channels.max(1)),
                u16::MAX / 4
            )),
            None => Ok(()),
        }
    }

    /// The rings of `sources` must fit in half of the memory fftd may use
    /// (`limits::usable_memory_bytes`: the bound the batch buffers keep too), else a usage error
    /// naming the flags: a ring fills as the run goes, so one too large would end the run hours
    /// in, killed for memory.
    pub(crate) fn check_memory<'a>(
        &mut self,
        sources: impl Iterator<Item = &'a crate::source::SourceInfo>,
    ) -> Result<(), String> {
        let sources: Vec<_> = sources.collect();
        self.lead = tap::RING_LEAD_VALUES / sources.len().max(1);
        let Some(total) = crate::limits::usable_memory_bytes() else {
            return Ok(());
        };
        let bytes: f64 = (sources.iter())
            .map(|info| {
                let (width, frames) = self.ring_size(info);
                // (a ring's deque grows to the next power of two of the values it holds)
                let held = width as f64 * frames + self.lead as f64;
                let values = held.max(1.0).log2().ceil().exp2();
                values * std::mem::size_of::<f32>() as f64
            })
            .sum();
        if bytes <= total as f64 / 2.0 {
            return Ok(());
        }
        let gib = |b: f64| b / f64::from(1u32 << 30);
        Err(format!(
            "--record-on-alert: --pre {} s and --post {} s of the inputs need {:.1} GiB of memory for the pre-roll, more than half of the {:.1} GiB fftd may use here: shorten them",
            crate::types::shown(self.options.pre),
            crate::types::shown(self.options.post),
            gib(bytes),
            gib(total as f64)
        ))
    }

    /// Taps a source feeding streams `first_stream..first_stream + streams`: the ring to wrap it
    /// with (`tap::TapSource`).
    pub(crate) fn tap(
        &mut self,
        info: &crate::source::SourceInfo,
        first_stream: usize,
        streams: usize,
    ) -> Arc<Mutex<Ring>> {
        let (width, frames) = self.ring_size(info);
        let ring = Arc::new(Mutex::new(Ring::new(width, frames as usize, self.lead)));
        self.sources.push(Tapped {
            ring: ring.clone(),
            first_stream,
            streams,
            shape: Shape {
                rate: info.rate,
                width,
                complex: info.kind == crate::types::InputKind::Complex,
            },
            seen: vec![0; streams],
        });
        ring
    }

    fn source_of(&self, stream: usize) -> Option<&Tapped> {
        self.sources.iter().find(|s| s.feeds(stream))
    }

    fn start(&self, event: &Event, tapped: &Tapped, ring: &mut Ring) -> std::io::Result<()> {
        let at = (event.time_s * tapped.shape.rate).round().max(0.0) as u64;
        if let Some(r) = ring
            .recordings
            .iter_mut()
            .find(|r| r.rule == event.alert && r.stream == event.stream)
        {
            r.end = None; // again inside the post-roll: the same file goes on
            return Ok(());
        }
        let pre = (self.options.pre * tapped.shape.rate).round() as u64;
        let mut first = at.saturating_sub(pre);
        if first < ring.start {
            tracing::warn!(
                alert = %event.alert,
                "--record-on-alert: the pre-roll reaches back past the ring; the recording starts {:.3} s later",
                (ring.start - first) as f64 / tapped.shape.rate
            );
            first = ring.start;
        }
        let name = format!(
            "{}_{}_s{}",
            file_time(self.epoch_s + first as f64 / tapped.shape.rate),
            event.alert,
            event.stream
        );
        let description = format!("fftd --alert {} on stream {}", event.alert, event.stream);
        let stem = self.options.dir.join(name);
        let writer = SampleWriter::create(&stem, tapped.shape, description).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("{}: {e}", crate::types::shown_path(&stem)),
            )
        })?;
        tracing::info!(file = %crate::types::shown_path(writer.path()), "recording begun");
        ring.recordings.push(Active {
            rule: event.alert.clone(),
            stream: event.stream,
            writer,
            first,
            next: first,
            end: None,
        });
        ring.feed()
    }

    /// Completes the recordings of `tapped` whose end is before frame `now` (all with `None`).
    fn close_ended(ring: &mut Ring, now: Option<u64>) -> std::io::Result<()> {
        let mut k = 0;
        while k < ring.recordings.len() {
            let r = &ring.recordings[k];
            let done = match (now, r.end) {
                (None, _) => true,
                (Some(now), Some(end)) => now > end,
                (Some(_), None) => false,
            };
            if !done {
                k += 1;
                continue;
            }
            let r = ring.recordings.swap_remove(k);
            let keep = r.end.map_or(r.writer.frames, |end| end - r.first);
            let path = r.writer.finish(keep)?;
            tracing::info!(file = %crate::types::shown_path(&path), "recording complete");
        }
        Ok(())
    }
}

impl crate::alerts::Listener for Recorder {
    fn target(&self) -> String {
        format!(
            "--record-on-alert {}",
            crate::types::shown_path(&self.options.dir)
        )
    }

    fn event(&mut self, event: &Event) -> std::io::Result<()> {
        let Some(tapped) = self.source_of(event.stream) else {
            return Ok(());
        };
        let Ok(mut ring) = tapped.ring.lock() else {
            return Ok(());
        };
        match event.change {
            Change::Start => self.start(event, tapped, &mut ring),
            // the run ended with the alert on: the recording holds the input to its end
            Change::End if event.run_end => Ok(()),
            Change::End => {
                let at = (event.time_s * tapped.shape.rate).round().max(0.0) as u64;
                let post = (self.options.post * tapped.shape.rate).round() as u64;
                for r in ring.recordings.iter_mut() {
                    if r.rule == event.alert && r.stream == event.stream {
                        r.end = Some(at + post);
                    }
                }
                Ok(())
            }
        }
    }

    fn row(&mut self, stream: usize, time_s: f64) -> std::io::Result<()> {
        let pre_s = self.options.pre;
        let Some(tapped) = self.sources.iter_mut().find(|s| s.feeds(stream)) else {
            return Ok(());
        };
        let now = (time_s * tapped.shape.rate).round().max(0.0) as u64;
        if let Some(seen) = tapped.seen.get_mut(stream - tapped.first_stream) {
            *seen = (*seen).max(now);
        }
        // an alert starts at a row no older than every stream's last: its pre-roll is kept
        let oldest = tapped.seen.iter().copied().min().unwrap_or(0);
        let pre = (pre_s * tapped.shape.rate).round() as u64;
        let Ok(mut ring) = tapped.ring.lock() else {
            return Ok(());
        };
        if let Some(why) = ring.failed.take() {
            return Err(std::io::Error::other(why));
        }
        ring.keep_from(oldest.saturating_sub(pre + 1));
        match ring.recordings.is_empty() {
            false => Self::close_ended(&mut ring, Some(now)),
            true => Ok(()),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        for tapped in &self.sources {
            if let Ok(mut ring) = tapped.ring.lock() {
                if let Some(why) = ring.failed.take() {
                    return Err(std::io::Error::other(why));
                }
                ring.feed()?;
                Self::close_ended(&mut ring, None)?;
            }
        }
        Ok(())
    }
}

/// `20261125T170721.500Z` for `epoch_s` seconds since 1970.
fn file_time(epoch_s: f64) -> String {
    let pattern =
        crate::sink::rotate_names::NamePattern::new(std::path::Path::new("%Y%m%dT%H%M%S"))
            .map(|p| p.render(epoch_s, 0).display().to_string())
            .unwrap_or_default();
    let ms = ((epoch_s - epoch_s.floor()) * 1000.0).floor() as u32;
    format!("{pattern}.{ms:03}Z")
}
