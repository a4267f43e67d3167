//! One run, top to bottom: the set-up steps (`run_steps::Early`, `Built`, `plan::Planned`, then
//! `run_stages::Stages::assemble`, which opens the outputs), every stage on its own threads
//! joined by bounded channels (`Stages::run_threads`: source → frame → batch → fft → products →
//! encode → sink), then the teardown here: the workers joined, the sidecar, the report and what
//! `auto` learns.

use super::fft_side::EngineLanes;
use super::outputs::write_run_meta;
use super::plan::Planned;
use super::run_stages::Stages;
use super::run_steps::{teach_auto, Built, Early};
use super::{run_report, stalled_error, PANIC_JOIN_PATIENCE};
use crate::error::{FftdError, Result};
use crate::pipeline::spec::RunSpec;
use crate::stats::Latency;
use crate::types::{Sample, Signals};
use std::sync::atomic::Ordering;
use std::time::Instant;

pub(super) fn run_typed<T: Sample>(run_spec: &RunSpec, signals: Signals) -> Result<()> {
    let started = Instant::now();
    let age = crate::left_behind::age_s().map(|age| format!("{age:.3}"));
    tracing::debug!(age_s = age, "the run starts");
    let early = Early::open(run_spec)?;
    let built = Built::<T>::build(run_spec, early.live)?;
    let cpu_only = built.cpu_only_spec(run_spec);
    let run_spec = cpu_only.as_ref().unwrap_or(run_spec);
    // a device started in the background begins now, while the run plans and opens outputs
    let (engines, _start_up) = EngineLanes::new(built.set, started);
    let auto_route = engines.start.auto_route();
    let mut planned = Planned::plan(run_spec, &signals.stop)?;
    let taps = planned.take_taps();
    let stop = &signals.stop;
    let (stages, handoff) =
        Stages::<T>::assemble(run_spec, &planned, taps, engines, early, stop, started)?;
    let control = &stages.workers.context.control;
    let startup = run_report::Startup {
        started,
        engines: built.building,
        ended: Instant::now(),
    };
    startup.record(control);
    let mut latency = Latency::default();
    let ran = stages.run_threads(handoff, &signals, &mut latency);
    let (written, sink_ended) = (ran.written, ran.sink_ended);

    // the teardown
    let given_up = join_workers(&stages);
    let dispatcher = &stages.workers.context.dispatcher;
    let pools = stages.workers.pools();

    let interrupted = signals.interrupted.load(Ordering::Relaxed);
    let error = control.take_error().or_else(|| {
        let cut = dispatcher.cut();
        (!interrupted)
            .then(|| stalled_error(&given_up, cut))
            .flatten()
    });
    say_if_nothing_arrived(interrupted && error.is_none(), &written);
    let by_stream = (&planned.streams[..], &written[..]);
    let to = (&stages.sinks.outputs[..], &stages.sinks.writer_of[..]);
    let meta_file = stages.meta_file;
    let meta_written = write_run_meta(
        run_spec,
        meta_file,
        by_stream,
        to,
        // (a closed output stopped it early too: its rows stop short of the inputs' end)
        (error.as_ref(), interrupted || control.output_closed()),
    );
    settle_spares(stages.workers.lane_set.has_device(), pools);
    // everything the run does is done: the report, then the timeline
    let ended = run_report::Ended {
        started,
        sink_ended,
        readers: stages.readers.total(),
        encoders: stages.encoders,
        window: dispatcher.widest_window(),
        block_misses: pools.misses_report(),
    };
    let traced = ended.report(run_spec, control, &latency, &stages.workers.lane_set);
    after_the_run_error(error.as_ref(), meta_written)?;
    after_the_run_error(error.as_ref(), traced)?;

    let live_view = stages.live_view;
    if let Some(e) = error {
        if let Some(view) = live_view {
            view.finish(false, &signals.interrupted);
        }
        return Err(e);
    }
    let lanes = &*stages.workers.lane_set;
    teach_auto(auto_route, built.job, control, lanes, started);
    if let Some(view) = live_view {
        view.finish(true, &signals.interrupted);
    }
    Ok(())
}

/// `written` (the `--meta` or `--trace` file): its error, unless the run failed before it (a
/// full disk fills the output first): the run's own error is then the one said, this one a
/// warning after it.
fn after_the_run_error(run_error: Option<&FftdError>, written: Result<()>) -> Result<()> {
    // (a stop that exits 0 is not a failure: the write's error is the run's then)
    match (run_error.filter(|e| e.exit_code() != 0), written) {
        (Some(_), Err(e)) => {
            tracing::warn!("{e}");
            Ok(())
        }
        (_, written) => written,
    }
}

/// A run stopped (`stopped`) before any frame was written: a FIFO with no writer, a stdin that
/// sent nothing. It ends as asked, and says so.
fn say_if_nothing_arrived(stopped: bool, written: &[super::StreamWritten]) {
    if stopped && written.iter().all(|w| w.frames == 0) {
        tracing::warn!("stopped before any input arrived; nothing was analysed");
    }
}

/// Joins the FFT workers, all but those stuck on a lane the run gave up (never to return; the
/// lanes are returned) and, after a worker's panic, one stuck on a hung device past
/// `PANIC_JOIN_PATIENCE`. A device's driver exit handlers are then not waited for.
fn join_workers<T: Sample>(stages: &Stages<T>) -> Vec<(super::LaneId, String, u64)> {
    let dispatcher = &stages.workers.context.dispatcher;
    let given_up = dispatcher.given_up();
    let patience = dispatcher.was_abandoned().then_some(PANIC_JOIN_PATIENCE);
    let left = |lane| given_up.iter().any(|(i, _, _)| *i == lane);
    stages.workers.threads.join(left, patience);
    if stages.workers.lane_set.has_device() {
        crate::left_behind::skip_driver_exit();
    }
    given_up
}

/// The pools' pinned spares: released now, inside the teardown that --stats and --trace account
/// for (and `auto`'s clock: left to the process's exit, the driver's unpinning would still hold
/// the exit, unseen; issue 23); or, after a device's use, left to the process's exit with the
/// engines (`left_behind`).
fn settle_spares<T: Sample>(had_device: bool, pools: &super::pool::Pools<T>) {
    match had_device {
        true => {
            let spares = (pools.samples.take_spares(), pools.spectra.take_spares());
            crate::left_behind::keep(Box::new(spares));
        }
        false => {
            pools.samples.release_spares();
            pools.spectra.release_spares();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_write_error_is_the_runs_unless_the_run_failed_first() {
        let write_failed = || Err(FftdError::Runtime("cannot write --meta m.json".into()));
        let failed = FftdError::Runtime("disk full".into());
        assert!(after_the_run_error(Some(&failed), write_failed()).is_ok());
        // a stop exits 0: the write's error must not be lost to a warning (helper-51)
        let stopped = FftdError::Stopped("stopped while waiting".into());
        assert!(after_the_run_error(Some(&stopped), write_failed()).is_err());
        assert!(after_the_run_error(None, write_failed()).is_err());
    }
}
