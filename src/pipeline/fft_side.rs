//! The FFT side of a run, made before any thread starts: the engines as the run takes them
//! (`EngineLanes`: the lanes ready now, and a device start-up in the background), the state the
//! workers share with the other stages (`Workers`: dispatcher, pools, products), and what the
//! threads take over (`Handoff`). `run_stages` wires them into the run.

use super::dispatch::carriage::RunFacts;
use super::dispatch::Dispatcher;
use super::late_join::{self, LateLanes, StartUpThread};
use super::{join_lane, pool, worker, Control, JoinedLane, WorkerThreads};
use crate::fft::lanes::LaneSet;
use crate::fft::route::Start;
use crate::fft::{router, TransformSpec};
use crate::limits;
use crate::products::{Segmenting, Shaping};
use crate::sink::destination::Destination;
use crate::types::Sample;
use crossbeam_channel::Receiver;
use std::sync::Arc;
use std::time::Instant;

/// The engines as the run takes them: the lanes ready now, those built meanwhile, and how
/// many workers the ready ones have.
pub(super) struct EngineLanes<T: Sample> {
    lane_set: Arc<LaneSet>,
    ready: Vec<router::LaneEngines<T>>,
    /// The lanes a device start-up in the background will bring (`late_lanes_thread`).
    pub(super) later: Option<LateLanes<T>>,
    /// How the lanes start (`route::plan`).
    pub(super) start: Start,
}

impl<T: Sample> EngineLanes<T> {
    /// The engine set taken apart; a device start-up in the background begins here (its
    /// thread is left to the process's exit when the run ends first: `StartUpThread`).
    pub(super) fn new(
        set: router::EngineSet<T>,
        started: Instant,
    ) -> (Self, Option<StartUpThread>) {
        let router::EngineSet {
            lane_set,
            ready,
            later,
            start,
        } = set;
        let pays = start.begins_devices_only_if_they_pay();
        let start_late = |build| late_join::late_lanes_thread(build, lane_set.clone(), pays);
        let (later, start_up) = later.map(start_late).unzip();
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1e3,
            workers = ready.iter().map(|l| l.engines.len()).sum::<usize>(),
            lanes = ready.len(),
            "engines ready"
        );
        let engines = EngineLanes {
            lane_set,
            ready,
            later,
            start,
        };
        (engines, start_up)
    }
}

/// The FFT side of a run: the state the workers share with the other stages (their threads are
/// not scoped: `dispatch`), their threads, and the lanes.
pub(super) struct Workers<T: Sample> {
    pub(super) context: Arc<worker::WorkerContext<T>>,
    pub(super) threads: WorkerThreads,
    pub(super) lane_set: Arc<LaneSet>,
    /// Once a device lane joins late, the CPU lane takes no new batches (it finishes those
    /// queued to it).
    pub(super) retire_cpu: bool,
    /// Closed when dispatching has ended.
    pub(super) dispatch_ended: Receiver<()>,
    /// Workers of the lanes ready at the start.
    pub(super) ready: usize,
    /// Spare batch buffers per lane: enough for every batch that can be in flight in one lane.
    pub(super) in_flight: usize,
    /// The first stream's transform: every device engine runs it once before its lane takes
    /// batches (`worker::warm_up`); None with no streams and for live input.
    pub(super) warm: Option<TransformSpec>,
}

impl<T: Sample> Workers<T> {
    /// The dispatcher and the pools (expecting buffers of `device_batch_values`, input and
    /// output, when devices join late); the ready lanes join before any producer starts.
    pub(super) fn new(
        mut engines: EngineLanes<T>,
        control: Control,
        (products, facts): ((Option<Shaping>, Option<Segmenting>), RunFacts),
        (device_batch_values, warm): (Option<(usize, usize)>, Option<TransformSpec>),
    ) -> (Self, Handoff<T>) {
        let ready: usize = engines.ready.iter().map(|l| l.engines.len()).sum();
        let lane_workers = (engines.ready.iter()).map(|l| l.engines.len()).max();
        let in_flight = limits::batch_buffers_in_flight(lane_workers.unwrap_or(1));
        let (mut dispatcher, dispatch_ended) = Dispatcher::new(engines.lane_set.clone());
        dispatcher.set_run_facts(facts);
        let context = Arc::new(worker::WorkerContext {
            control,
            dispatcher,
            pools: pool::Pools::new(in_flight),
            products,
        });
        let pools = &context.pools;
        if let Some((values_in, values_out)) = device_batch_values {
            pools.samples.expect(values_in);
            pools.spectra.expect(values_out);
        }
        // a device named outright builds its kernels before it takes batches, as a late one
        if let Some(spec) = &warm {
            let lanes = engines.ready.iter_mut();
            lanes.for_each(|lane| worker::warm_up_lane(lane, spec, &context));
        }
        let ready_lanes: Vec<_> = (engines.ready.into_iter())
            .filter_map(|lane| {
                join_lane(&context.dispatcher, pools, lane, pool::HomeBlocks::AsMissed)
            })
            .collect();
        let handoff = Handoff {
            ready_lanes,
            late_lanes: engines.later,
            ..Handoff::default()
        };
        let workers = Workers {
            context,
            threads: WorkerThreads::default(),
            lane_set: engines.lane_set,
            retire_cpu: engines.start.retires_cpu(),
            dispatch_ended,
            ready,
            in_flight,
            warm,
        };
        (workers, handoff)
    }

    pub(super) fn pools(&self) -> &pool::Pools<T> {
        &self.context.pools
    }
}

/// What the threads take over: the ready lanes and those to come, the sink's destinations
/// and its alerts.
pub(super) struct Handoff<T: Sample> {
    pub(super) ready_lanes: Vec<JoinedLane<T>>,
    pub(super) late_lanes: Option<LateLanes<T>>,
    /// The outputs' destinations, and each one's rotation.
    pub(super) outputs: (Vec<Destination>, Vec<Option<crate::sink::rotate::Rotation>>),
    pub(super) alerts: Option<crate::alerts::Alerts>,
}

impl<T: Sample> Default for Handoff<T> {
    fn default() -> Self {
        Handoff {
            ready_lanes: Vec::new(),
            late_lanes: None,
            outputs: (Vec::new(), Vec::new()),
            alerts: None,
        }
    }
}
