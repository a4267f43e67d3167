//! `/metrics`: the run's counters, stage times, frame-to-sink latency histogram and the server's
//! own counters in the Prometheus text exposition format (version 0.0.4).

use super::hub::LiveHub;
use crate::stats::{Counters, LATENCY_BOUNDS_S};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// The content type Prometheus expects for this format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) fn render(hub: &LiveHub) -> String {
    let c = &*hub.counters;
    let mut out = String::new();
    let get = Counters::get;
    counter(
        &mut out,
        "fftd_frames_in_total",
        "Frames cut by the framers.",
        get(&c.frames_in),
    );
    counter(
        &mut out,
        "fftd_frames_out_total",
        "Frames written by the sink.",
        get(&c.frames_out),
    );
    counter(
        &mut out,
        "fftd_frames_dropped_total",
        "Frames of live input dropped because the analysis fell behind.",
        get(&c.dropped),
    );
    counter(
        &mut out,
        "fftd_samples_in_total",
        "Samples read, per channel.",
        get(&c.samples_in),
    );
    stage_seconds(&mut out, c);
    crate::timeline::render_metrics(&c.times, &mut out);
    latency_histogram(&mut out, c);
    if let Some(alerts) = hub.alerts.get() {
        alerts.render_metrics(&mut out); // issue 27
    }
    crate::source::outages::outages().render_metrics(&mut out); // issue 27: --retry
    crate::heap::render_metrics(&mut out); // issue 27: memory over long runs
    serve_metrics(&mut out, hub);
    gauge(
        &mut out,
        "fftd_input_finished",
        "1 once every input has ended.",
        if *hub.finished().borrow() { 1.0 } else { 0.0 },
    );
    out
}

/// The live view's own connections and what they were sent.
fn serve_metrics(out: &mut String, hub: &LiveHub) {
    let s = &hub.serve;
    let get = Counters::get;
    gauge(
        out,
        "fftd_serve_ws_sessions",
        "WebSocket sessions open.",
        s.ws_sessions.load(Ordering::Relaxed) as f64,
    );
    gauge(
        out,
        "fftd_serve_spectra_readers",
        "/spectra responses open.",
        hub.spectra_readers() as f64,
    );
    counter(
        out,
        "fftd_serve_ws_rows_sent_total",
        "Display rows sent to WebSocket sessions.",
        get(&s.ws_rows_sent),
    );
    counter(
        out,
        "fftd_serve_ws_rows_skipped_total",
        "Display rows WebSocket sessions missed because they read too slowly.",
        get(&s.ws_rows_skipped),
    );
    counter(
        out,
        "fftd_serve_ws_clients_dropped_total",
        "WebSocket sessions closed because they stopped reading.",
        get(&s.ws_dropped_clients),
    );
    counter(
        out,
        "fftd_serve_spectra_rows_sent_total",
        "Rows sent to /spectra readers.",
        get(&s.spectra_rows_sent),
    );
    counter(
        out,
        "fftd_serve_spectra_rows_skipped_total",
        "Rows /spectra readers missed because they read too slowly.",
        get(&s.spectra_rows_skipped),
    );
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    header(out, name, help, "counter");
    let _ = writeln!(out, "{name} {value}");
}

fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    header(out, name, help, "gauge");
    let _ = writeln!(out, "{name} {value}");
}

fn seconds(ns: &AtomicU64) -> f64 {
    Counters::get(ns) as f64 / 1e9
}

/// Busy and waiting time of each stage, summed over its threads.
fn stage_seconds(out: &mut String, c: &Counters) {
    let name = "fftd_stage_busy_seconds_total";
    header(
        out,
        name,
        "Time each stage spent working, summed over its threads.",
        "counter",
    );
    for (stage, ns) in [
        ("fft", &c.engine_ns),
        ("encode", &c.encode_ns),
        ("sink", &c.sink_ns),
    ] {
        let _ = writeln!(out, "{name}{{stage=\"{stage}\"}} {}", seconds(ns));
    }
    let name = "fftd_stage_wait_seconds_total";
    header(
        out,
        name,
        "Time a stage waited for the next one to take its work.",
        "counter",
    );
    for (stage, ns) in [("read", &c.reader_wait_ns), ("batch", &c.batcher_wait_ns)] {
        let _ = writeln!(out, "{name}{{stage=\"{stage}\"}} {}", seconds(ns));
    }
}

fn latency_histogram(out: &mut String, c: &Counters) {
    let name = "fftd_frame_latency_seconds";
    header(
        out,
        name,
        "Frame complete to spectrum written.",
        "histogram",
    );
    let mut cumulative = 0u64;
    for (bound, count) in LATENCY_BOUNDS_S.iter().zip(&c.latency.counts) {
        cumulative += Counters::get(count);
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    // +Inf from the buckets themselves, so it is never below the last bound's count
    let total = cumulative + c.latency.counts.last().map_or(0, Counters::get);
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {total}");
    let _ = writeln!(out, "{name}_sum {}", seconds(&c.latency.sum_ns));
    let _ = writeln!(out, "{name}_count {total}");
}
