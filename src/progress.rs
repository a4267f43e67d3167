//! Progress of a long file job on stderr: samples done of the total, rate and time left (a
//! spinner with the count and rate when the total is not known, as for text inputs). Shown only
//! when stderr is a terminal and `--quiet` is not given; never for live input. With `--trace`,
//! each update is a span on a `progress` track.

use crate::stats::Counters;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Whether a progress display belongs on this run's stderr.
pub(crate) fn wanted(quiet: bool, live: bool) -> bool {
    !quiet && !live && std::io::stderr().is_terminal()
}

/// Sets its flag when dropped: ends `show` when the sink returns, or unwinds.
pub(crate) struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Shows `samples` (counted by the readers) against `total` until `finished` is set, then clears
/// the line. Runs on a thread of its own.
pub(crate) fn show(
    samples: &AtomicU64,
    total: Option<u64>,
    finished: &AtomicBool,
    tracer: Option<&crate::trace::Tracer>,
) {
    let mut track = crate::trace::Track::new(tracer, "progress");
    let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr_with_hz(5));
    let template = match total {
        Some(_) => "{percent:>3}% {human_pos}/{human_len} samples, {msg}, {eta} left",
        None => "{spinner} {human_pos} samples, {msg}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    let started = std::time::Instant::now();
    while !finished.load(Ordering::Relaxed) {
        let busy = std::time::Instant::now();
        let done = Counters::get(samples);
        bar.set_position(done);
        let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!("{:.1} M samples/s", rate / 1e6));
        if let Some(track) = &mut track {
            track.span_since("progress", busy, (None, None));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}
