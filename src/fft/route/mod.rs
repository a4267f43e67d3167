//! Which lane takes a batch: every CPU/GPU decision of a run, in one place, each from plain
//! values and each unit-tested without a device.
//!
//! - **Which lanes a run starts, and when** (`plan`, from `Facts`): the lanes `--device` names,
//!   opened before the run or, for GPU-type devices on file input, built in the background while
//!   a CPU lane bridges their start-up (`Start::Bridged`); for `auto` on a file job, the way its
//!   record of earlier runs says is fastest end to end (`record::RouteRecord::choose`: the CPU
//!   engines alone, the GPU alone, or both sharing batches by the rates each way delivered).
//! - **Which devices `auto` gives a lane** (`calibration_favours_device`): those its calibration
//!   finds faster than the CPU engine at some size.
//! - **How fast each lane is** (`LaneSpeed`): a device's calibration, the record's rates, or the
//!   same for every lane when nothing is measured.
//! - **Which lane takes this batch** (`rank`, asked by `pipeline::dispatch` for every batch): the
//!   lane predicted to get through its unfinished batches and this one first; a lane in reserve
//!   (`later_devices_in_reserve`: the GPUs after the first under `gpu:all` and `auto`) only
//!   while the devices not in reserve are full; and whether those in reserve start at all
//!   (`another_device_pays`: only when the first device bounds the run).
//! - **What a run teaches** (`record::learn`): its end-to-end rate, and the CPU engines' rate
//!   from their bridge over a device's start-up.
//!
//! What the machine's devices turned out to be is remembered between runs (`kinds`), so the
//! plan is made before OpenCL is opened.

pub(crate) mod gpu_view;
pub(crate) mod kinds;
pub(crate) mod record;
mod speed;

pub(crate) use speed::{LaneSpeed, SpeedSide};

use super::device_choice::DeviceChoice;
use record::{AutoRoute, RouteRecord};
use std::time::Duration;

/// What a run's lanes are decided from.
#[derive(Clone, Debug)]
pub(crate) struct Facts {
    pub choice: DeviceChoice,
    /// A live input (the microphone, a radio): read as it comes.
    pub live: bool,
    /// Fault injection strikes batches (`FFTD_FAULT_AFTER_BATCHES` counts a device's batches
    /// from the first, which a bridging CPU lane would otherwise take; a fault of the warm-up
    /// alone leaves the run bridged).
    pub faults: bool,
    /// An earlier run found `choice` to name GPU-type devices alone (`kinds`).
    pub gpus_alone: bool,
    /// `auto` on a whole file job that can learn (a cache folder, and no recent finding of no
    /// GPU here): the job's record. None: `auto` runs the CPU engines alone.
    pub record: Option<RouteRecord>,
}

impl Facts {
    /// The facts of this machine for a run of `choice`; `job` is `auto`'s job on file input
    /// (None for any other run).
    pub(crate) fn gather(choice: &DeviceChoice, live: bool, job: Option<&record::JobKey>) -> Self {
        // (the cache files are read only where the plan looks at them)
        let auto_file_job = *choice == DeviceChoice::Auto && !live;
        let learning = || auto_file_job && RouteRecord::kept() && kinds::auto_may_find_gpus();
        let named_on_file = choice.names_a_device() && !live;
        Facts {
            choice: choice.clone(),
            live,
            faults: super::fault::FaultPlan::from_env().strikes_batches(),
            gpus_alone: named_on_file && kinds::names_gpus_alone(choice),
            record: job.filter(|_| learning()).map(RouteRecord::load),
        }
    }
}

/// How a run's lanes start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Start {
    /// The lanes `--device` names, opened before the run (`cpu`; live input, whose capture must
    /// not wait; a device not known to be a GPU: an OpenCL device on the CPU shares the cores a
    /// CPU lane would bridge with; fault injection; `auto` on live input, which may calibrate).
    Opened,
    /// A CPU lane at once, the named devices' lanes built in the background; the CPU lane retires
    /// once a device has returned its first batch (issue 23: start-up off the critical path).
    Bridged,
    /// `auto` on a file job: a CPU lane at once, and the GPUs' lanes in the background unless
    /// `route` is the CPU engines alone. With both, batches are shared by `shares` (the CPU
    /// engines' rate alone, the GPUs' rate alone) when the record has both.
    Auto {
        route: AutoRoute,
        shares: Option<(f64, f64)>,
    },
}

impl Start {
    /// Whether the CPU lane retires once a device's lane has returned its first batch.
    pub(crate) fn retires_cpu(&self) -> bool {
        matches!(
            self,
            Start::Bridged
                | Start::Auto {
                    route: AutoRoute::GpuOnly,
                    ..
                }
        )
    }

    /// Whether a device start-up in the background begins only where the run's work left could
    /// pay for it (`late_join::start_up_could_pay`): wherever devices are built late, `auto`'s
    /// included (a run's devices opened before it, `Opened`, have no such gate). Until session
    /// 35 `auto` always began it, to learn from it; where it could not pay the device never
    /// joined, so `auto` learned the CPU's rate anyway, and paid the driver's start-up beside
    /// the CPU lanes: its runs of the GPU alone took 0.47 s against
    /// 0.18 for `gpu` (1 GiB plain 4096 on 4 cores of a two-H200 host) and 0.22 against 0.10
    /// (Welch on 16), no device joining either (docs/perf.md).
    pub(crate) fn begins_devices_only_if_they_pay(&self) -> bool {
        self.builds_late()
    }

    /// Whether devices' lanes are built in the background while a CPU lane works.
    pub(crate) fn builds_late(&self) -> bool {
        match self {
            Start::Opened => false,
            Start::Bridged => true,
            Start::Auto { route, .. } => *route != AutoRoute::CpuOnly,
        }
    }

    /// The way `auto` runs this file job (its rate is learned at the end), None otherwise.
    pub(crate) fn auto_route(&self) -> Option<AutoRoute> {
        match self {
            Start::Auto { route, .. } => Some(*route),
            _ => None,
        }
    }
}

/// How the run's lanes start, from `facts` alone.
pub(crate) fn plan(facts: &Facts) -> Start {
    if facts.choice != DeviceChoice::Auto || facts.live {
        let bridged =
            !facts.live && facts.choice.names_a_device() && !facts.faults && facts.gpus_alone;
        return match bridged {
            true => Start::Bridged,
            false => Start::Opened,
        };
    }
    let Some(record) = &facts.record else {
        return Start::Auto {
            route: AutoRoute::CpuOnly,
            shares: None,
        };
    };
    let route = record.choose();
    let shares = (route == AutoRoute::WithGpu)
        .then(|| record.shares())
        .flatten();
    Start::Auto { route, shares }
}

/// Whether `auto` gives a device a lane by its calibration: where it was faster than the CPU
/// engine at some measured size (`rank` then sends it the batches it is predicted to finish
/// first).
pub(crate) fn calibration_favours_device(cal: &super::calibrate::Calibration) -> bool {
    cal.points.iter().any(|p| p.gpu_s < p.cpu_s)
}

/// Whether, under `choice`, the device lanes after the first wait in reserve: they take a batch
/// only while the devices not in reserve have their queues and workers full (or there is none,
/// before the first has come up or after it failed), so a second GPU joins a run only when the
/// first cannot keep up — where the readers or the host's memory pace a run, another device
/// adds its start-up and contention, not rate (issue 41: `gpu:all` 0.71x `gpu` on log-mel on two
/// H200s). So under `gpu:all` and `auto`; devices listed outright share as their backlogs say.
pub(crate) fn later_devices_in_reserve(choice: &DeviceChoice) -> bool {
    matches!(choice, DeviceChoice::AllGpus | DeviceChoice::Auto)
}

/// Whether the `nth` device lane (0: the first, the strongest) waits in reserve under `choice`
/// (`later_devices_in_reserve`).
pub(crate) fn waits_in_reserve(choice: &DeviceChoice, nth: usize) -> bool {
    nth > 0 && later_devices_in_reserve(choice)
}

/// What decides whether the devices waiting in reserve start at all (`another_device_pays`),
/// looked at while the first device works.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Demand {
    /// The share of the first device's workers' time spent in its engines, the lowest of its
    /// last `DEMAND_WINDOWS` windows: near 0.9 when the device (its transfers, its kernels)
    /// bounds the run, lower when the readers, the host's memory or the sink pace it.
    pub busy: f64,
    /// What the run still needs at its rate so far (None: unknown, such as a live input).
    pub left: Option<Duration>,
    /// How long the first device took to come up: about what another one takes.
    pub start_up: Duration,
}

/// The first device's busy share from which it bounds the run (`Demand::busy`), and over how
/// many 100 ms windows running. On one H200 (2026-11-29) the device once joined read 87–91 %
/// per window, steadily, on 16 cores; on 4 cores, where the host paces the run, single windows
/// reached 80–91 % (the first after it joins, holding the batches queued meanwhile, up to
/// 131 %) but never three running at 85 %. On two H200s with 32 cores, both devices of
/// `gpu:all` started at once made runs 0.75–0.92x `gpu` (issue 41).
pub(crate) const DEVICE_BOUND_BUSY: f64 = 0.85;
pub(crate) const DEMAND_WINDOWS: usize = 3;

/// A device's start-up where the run did not see the first one's (opened before the run):
/// 0.27–0.44 s from the stages' start to a warm H200's join on 16 and 4 cores (2026-11-29),
/// rounded up; and the least taken as seen (a device may come up while the run still plans,
/// its start-up begun before the stages').
pub(crate) const UNSEEN_DEVICE_START_UP: Duration = Duration::from_millis(500);
pub(crate) const LEAST_DEVICE_START_UP: Duration = Duration::from_millis(250);

/// Whether the devices in reserve start: only when the first device bounds the run, and the
/// run has work left for three times a device's start-up (one to come up while contending
/// with the run for the host, two to pay for it). Otherwise another device adds its start-up,
/// its pinned memory and contention for the host, not rate: `gpu:all` is then `gpu`.
pub(crate) fn another_device_pays(demand: &Demand) -> bool {
    let time_to_pay = 3 * demand.start_up;
    demand.busy >= DEVICE_BOUND_BUSY && demand.left.is_none_or(|left| left > time_to_pay)
}

/// One lane as `rank` sees it: how fast it is, how many batches it has not finished, how many
/// it holds at most (its queue's and its workers'), whether it is a device's (not the CPU
/// engines') and whether it waits in reserve.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaneLoad<'a> {
    pub speed: &'a LaneSpeed,
    pub unfinished: u64,
    pub holds: u64,
    pub device: bool,
    pub reserve: bool,
}

/// Which lane takes a batch of `frames` frames of `n` samples: `candidates` (indexes into
/// `lanes`) ordered by the seconds each is predicted to need for its unfinished batches and this
/// one, least first. Speeds count only when every lane's were measured the same way (all by
/// calibration, or all by the record's rates); otherwise every lane is taken as equally fast, so
/// backlogs alone decide. In a saturated run each lane so takes batches at the rate it finishes
/// them, and when the queues have room the faster lane gets the next batch. Lanes in reserve come
/// after the others while a device's lane not in reserve has room (the CPU engines' lane does
/// not hold a reserve GPU back: it is the slower one).
pub(crate) fn rank(
    lanes: &[LaneLoad<'_>],
    candidates: &[usize],
    n: usize,
    frames: usize,
) -> Vec<usize> {
    let predicted = |i: usize| {
        let lane = &lanes[i];
        let measured = lanes.iter().all(|l| l.speed.comparable(lane.speed));
        let speed = match measured {
            true => lane.speed,
            false => &LaneSpeed::Even,
        };
        (lane.unfinished + 1) as f64 * speed.seconds(n, frames)
    };
    let room = |i: &usize| {
        let lane = &lanes[*i];
        lane.device && !lane.reserve && lane.unfinished < lane.holds
    };
    let others_have_room = candidates.iter().any(room);
    let held_back = |i: usize| others_have_room && lanes[i].reserve;
    let scores: Vec<(bool, f64)> = (candidates.iter())
        .map(|&i| (held_back(i), predicted(i)))
        .collect();
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, sa) = scores[a];
        let (rb, sb) = scores[b];
        ra.cmp(&rb).then(sa.total_cmp(&sb))
    });
    order.into_iter().map(|k| candidates[k]).collect()
}

#[cfg(test)]
mod tests;
