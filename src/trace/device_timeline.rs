//! `--trace`'s device tracks: each FFT worker's OpenCL engine has three queues (copy in,
//! kernels, copy out) and gets three tracks, "opencl:P:D engine K upload / kernels /
//! download", with one span per chunk of each batch (the batch and stream ids in `args`, like the
//! host spans). Engines hand over their chunks' device times (`device_trace::DeviceTrace`, in the device's
//! clock) after each batch; they are kept raw and placed on the host clock when the file is
//! written, with the tightest clock bounds of the whole run (`device_trace::ClockBounds`: the
//! upper bound, so a device span is never drawn before it happened; the bracket's width, the
//! most it can be late by, goes to `otherData.device_clocks`).

use super::device_trace::{self, ClockBounds, DeviceTrace};
use super::{Span, Tracer};
use std::sync::Mutex;

/// One queue's span, in device nanoseconds.
struct RawSpan {
    engine: usize,
    queue: usize,
    from: u64,
    to: u64,
    batch: u64,
    stream: Option<u32>,
}

/// One engine's tracks and clock.
struct EngineTracks {
    name: String,
    /// upload, kernels, download.
    tids: [u32; 3],
    clock: ClockBounds,
}

const QUEUES: [&str; 3] = ["upload", "kernels", "download"];

/// The device spans of a run (`Tracer::device`).
#[derive(Default)]
pub(crate) struct DeviceSpans {
    raw: Mutex<Vec<RawSpan>>,
    engines: Mutex<Vec<EngineTracks>>,
}

/// A worker's handle on its engine's tracks (made at its first device batch).
#[derive(Default)]
pub(crate) struct QueueTracks {
    engine: Option<usize>,
}

impl QueueTracks {
    /// Takes the device times of `engine`'s last batch (`batch`, first frame's `stream`) onto
    /// its queues' tracks.
    pub(crate) fn record(
        &mut self,
        tracer: &Tracer,
        trace: Option<DeviceTrace>,
        batch: u64,
        stream: Option<usize>,
    ) {
        let Some(trace) = trace else {
            return;
        };
        let spans = &tracer.device;
        let at = {
            let mut engines = spans.engines.lock().unwrap_or_else(|e| e.into_inner());
            let at = *self.engine.get_or_insert_with(|| {
                let k = engines
                    .iter()
                    .filter(|e| e.name.starts_with(&format!("{} engine ", trace.device)))
                    .count();
                let name = format!("{} engine {k}", trace.device);
                let tids = QUEUES.map(|q| tracer.track(format!("{name} {q}")));
                engines.push(EngineTracks {
                    name,
                    tids,
                    clock: ClockBounds::default(),
                });
                engines.len() - 1
            });
            if let Some(e) = engines.get_mut(at) {
                e.clock = trace.clock; // the engine's bounds so far
            }
            at
        };
        let stream = stream.map(|s| s as u32);
        let mut raw = spans.raw.lock().unwrap_or_else(|e| e.into_inner());
        for chunk in &trace.chunks {
            let parts = [Some(chunk.upload), chunk.kernels, Some(chunk.download)];
            for (queue, (from, to)) in parts
                .into_iter()
                .enumerate()
                .filter_map(|(q, p)| Some((q, p?)))
            {
                if tracer.take_one() {
                    raw.push(RawSpan {
                        engine: at,
                        queue,
                        from,
                        to,
                        batch,
                        stream,
                    });
                }
            }
        }
    }
}

impl DeviceSpans {
    /// The spans on the host clock, and `otherData.device_clocks` (a JSON array: per engine its
    /// tracks' name, the clock samples, and the most a span may be drawn late by, in µs, or
    /// null when no lower bound agreed).
    pub(crate) fn place(&self) -> (Vec<Span>, String) {
        let raw = std::mem::take(&mut *self.raw.lock().unwrap_or_else(|e| e.into_inner()));
        let engines = self.engines.lock().unwrap_or_else(|e| e.into_inner());
        let mut spans = Vec::with_capacity(raw.len());
        for s in raw {
            let Some(e) = engines.get(s.engine) else {
                continue;
            };
            let Some(offset) = e.clock.offset() else {
                continue;
            };
            let at = |ns: u64| device_trace::host_instant(ns as i64 + offset);
            spans.push(Span {
                name: QUEUES[s.queue],
                tid: e.tids[s.queue],
                from: at(s.from),
                to: at(s.to.max(s.from)),
                batch: Some(s.batch),
                stream: s.stream,
            });
        }
        let clocks: Vec<String> = engines
            .iter()
            .map(|e| {
                let name = serde_json::to_string(&e.name).unwrap_or_else(|_| "\"?\"".into());
                let late = e
                    .clock
                    .error_ns()
                    .map_or("null".to_string(), |ns| format!("{:.3}", ns as f64 / 1e3));
                format!(
                    "{{\"engine\":{name},\"samples\":{},\"late_at_most_us\":{late}}}",
                    e.clock.samples
                )
            })
            .collect();
        (spans, format!("[{}]", clocks.join(",")))
    }
}
