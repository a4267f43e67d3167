//! `--serve` in a run: starts the live view's server before the stages, hands the encode stage
//! and the sink their ends of the hub, and after the input keeps serving until Ctrl-C.

use super::averaging::AveragingStage;
use super::Control;
use crate::error::Result;
use crate::fft::Scale;
use crate::pipeline::spec::RunSpec;
use crate::products::measure::MeasureLayout;
use crate::serve::hub::LiveHub;
use crate::serve::Server;
use crate::sink::{make_encoder, Encoder, OutputFormat};
use crate::stats::Counters;
use crate::types::{Sample, StreamMeta};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct LiveView {
    pub hub: Arc<LiveHub>,
    server: Server,
}

impl LiveView {
    /// `listener`: from `serve::bind`; `numbering`: the counter that numbers the batches the
    /// encode stage receives.
    pub(crate) fn start(
        listener: crate::serve::Bound,
        streams: &[StreamMeta],
        (scale, measure): (Scale, &crate::products::measure::MeasureOptions),
        counters: Arc<Counters>,
        numbering: Arc<AtomicU64>,
        alerts: Option<Vec<String>>,
    ) -> Result<Self> {
        let mut hub = LiveHub::new(streams, scale, counters);
        hub.label(measure);
        // the alert rules' feed (`/events`) is there before the server answers its first page
        if let Some(names) = alerts {
            let feed = Arc::new(crate::alerts::feed::AlertFeed::new(names));
            let _ = hub.alerts.set(feed);
        }
        let hub = Arc::new(hub);
        hub.set_numbering(numbering);
        let server = Server::start(listener, hub.clone())?;
        if !server.addr.ip().is_loopback() {
            if !server.token {
                tracing::warn!(
                    "--serve {}: reachable from other machines, and nothing asks who is looking: give --serve-token (or --serve-token-file, FFTD_SERVE_TOKEN)",
                    server.addr
                );
            } else if !server.https {
                tracing::warn!(
                    "--serve {}: reachable from other machines over plain HTTP, so the token and the spectra cross the network in clear: give --serve-tls-cert and --serve-tls-key",
                    server.addr
                );
            }
        }
        eprintln!("fftd: live view on {}", server.url());
        Ok(LiveView { hub, server })
    }

    /// The input has ended (or the run failed): pages and `/spectra` readers are told. After a
    /// complete run the server stays up until SIGINT/SIGTERM.
    pub(crate) fn finish(self, completed: bool, interrupted: &AtomicBool) {
        self.hub.flush(); // the last frames' display rows go before the end
        self.hub.finish();
        if completed && !interrupted.load(Ordering::Relaxed) {
            eprintln!(
                "fftd: input finished; still serving {} (Ctrl-C to stop)",
                self.server.url()
            );
            while !interrupted.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.server.shutdown();
    }
}

/// The live view (`--serve`), counting the batches the encoders get: the averaging stage's, or
/// the batches'.
pub(super) fn start(
    run_spec: &RunSpec,
    listener: crate::serve::Bound,
    streams: &[StreamMeta],
    averaging: &Option<AveragingStage<'_>>,
    control: &Control,
) -> Result<LiveView> {
    let numbering = averaging.as_ref().map_or_else(
        || control.next_batch.clone(),
        |stage| stage.numbering.clone(),
    );
    let counters = control.counters.clone();
    let scale = run_spec.analysis.scale;
    let measure = &run_spec.analysis.products.measure;
    let look = (scale, measure);
    // issue 27: `/events` when the run has alert rules, an event stream or --retry's gaps
    // (`wire_alerts`)
    let options = &run_spec.alerts;
    let alerts = (options.wanted()).then(|| options.rules.iter().map(|r| r.name.clone()).collect());
    LiveView::start(listener, streams, look, counters, numbering, alerts)
}

/// `/spectra`'s rows: NDJSON, with the measurements after each row's columns.
pub(super) fn rows_encoder<T: Sample>(
    run_spec: &RunSpec,
    layout: Option<&Arc<MeasureLayout>>,
) -> Box<dyn Encoder<T>> {
    let rows = make_encoder::<T>(OutputFormat::Ndjson, run_spec.analysis.scale);
    crate::sink::measured::wrap(rows, OutputFormat::Ndjson, layout)
}
