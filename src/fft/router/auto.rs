//! `auto`'s devices: which GPUs it opens and gives a lane (those its calibration finds faster
//! than the CPU engine at some size, or those its record says help a file job). On file input
//! the strongest at once and the others only once the first bounds the run
//! (`LaneSet::await_later_devices`); on live input the strongest that gives a lane, alone
//! (`auto_live_lanes`).

use super::{
    open_all, reserve_later_devices, routed_lane, DeferredLanes, LaneEngines, LateLanes, Opened,
    RouterOptions,
};
use crate::fft::calibrate::Calibration;
use crate::fft::device_choice::DeviceChoice;
use crate::fft::device_set::{self, LaneDevice, LaneSpec};
use crate::fft::lanes::LaneSet;
use crate::fft::opencl::OpenClEngine;
use crate::fft::route::{self, kinds, LaneSpeed, SpeedSide};
use crate::types::Sample;
use std::sync::Arc;

/// `auto`'s GPU lanes, built when called: the strongest GPU at once, the others only once it
/// bounds the run (`LaneSet::await_later_devices`), in reserve; with `shares` (both lanes), the
/// CPU lane and the GPUs share batches by the rates each way delivered alone.
pub(super) fn auto_background_lanes<T: Sample>(
    opts: RouterOptions,
    lane_set: Arc<LaneSet>,
    shares: Option<(f64, f64)>,
) -> DeferredLanes<T> {
    Box::new(move |arrive| {
        let specs = auto_gpu_specs();
        let (first, rest) = specs.split_at(specs.len().min(1));
        let late = auto_arrival(first, &opts, &lane_set, shares);
        if late.lanes.is_empty() && !rest.is_empty() {
            // the strongest gave no lane (it failed to open, or is not faster): the others
            // as before, the first of them taking batches
            return arrive(auto_arrival(rest, &opts, &lane_set, shares));
        }
        arrive(late);
        if !rest.is_empty() && lane_set.await_later_devices() {
            let later = auto_arrival(rest, &opts, &lane_set, shares);
            later.lanes.iter().for_each(|l| l.lane.keep_in_reserve());
            arrive(later);
        }
    })
}

/// `auto`'s lanes for the GPUs of `specs`; with `shares`, each GPU lane at the GPU route's rate
/// (that route's rate was mostly one device's: the others wait in reserve).
fn auto_arrival<T: Sample>(
    specs: &[LaneSpec],
    opts: &RouterOptions,
    lane_set: &Arc<LaneSet>,
    shares: Option<(f64, f64)>,
) -> LateLanes<T> {
    let mut late = auto_gpu_lanes(specs, opts, lane_set);
    if let Some((cpu, gpu)) = shares.filter(|_| !late.lanes.is_empty()) {
        late.cpu_speed = Some(LaneSpeed::Rate(cpu));
        (late.lanes.iter_mut()).for_each(|l| l.speed = LaneSpeed::Rate(gpu));
    }
    late
}

/// What `auto` found among its devices (`auto_lanes`).
pub(super) struct AutoFound<'s, T: Sample> {
    /// A lane per device whose calibration predicts it faster than the CPU engine for some
    /// measured size, its speed from that calibration.
    pub(super) lanes: Vec<LaneEngines<T>>,
    /// The first of their calibrations, for the speed of a CPU lane beside them.
    pub(super) calibration: Option<Arc<Calibration>>,
    /// The devices opened but not in `lanes` (no calibration, or never faster by it): file jobs
    /// whose records say the GPU helps take them (`auto_gpu_lanes`).
    others: Vec<(&'s LaneSpec, Vec<OpenClEngine<T>>)>,
}

impl<T: Sample> AutoFound<'_, T> {
    /// Nothing found: no lane, no calibration, no other device.
    fn none() -> Self {
        AutoFound {
            lanes: Vec::new(),
            calibration: None,
            others: Vec::new(),
        }
    }
}

/// `auto`'s lanes among `specs`, each device's calibration cached or measured when allowed.
pub(super) fn auto_lanes<'s, T: Sample>(
    specs: &'s [LaneSpec],
    opts: &RouterOptions,
    lane_set: &Arc<LaneSet>,
) -> AutoFound<'s, T> {
    let mut found = AutoFound::none();
    for (spec, opened) in specs.iter().zip(open_all::<T>(specs, opts, true)) {
        let Opened { gpus, calibration } = match opened {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(
                    "OpenCL device {} unusable ({e}); using the CPU engine",
                    spec.name()
                );
                continue;
            }
        };
        let cal = match calibration {
            Some(Ok(c)) => c,
            other => {
                tracing::debug!(
                    "no calibration for {} ({:?})",
                    spec.name(),
                    other.and_then(Result::err)
                );
                found.others.push((spec, gpus));
                continue;
            }
        };
        if !route::calibration_favours_device(&cal) {
            tracing::debug!(
                "{}: its calibration finds the CPU engine faster at every size",
                spec.name()
            );
            found.others.push((spec, gpus));
            continue;
        }
        found.calibration.get_or_insert_with(|| cal.clone());
        let mut lane = routed_lane(spec, gpus, lane_set);
        lane.speed = LaneSpeed::Measured(cal, SpeedSide::OpenCl);
        found.lanes.push(lane);
    }
    found
}

/// `auto`'s lanes for live input, opened before the run: the first device of `specs` (strongest
/// first) that gives a lane, and no other. A live input's rate (a sound card, a radio) never
/// keeps one GPU busy; another would only add its start-up before capture begins, a
/// calibration on first use and its pinned memory for the run's whole life.
pub(super) fn auto_live_lanes<'s, T: Sample>(
    specs: &'s [LaneSpec],
    opts: &RouterOptions,
    lane_set: &Arc<LaneSet>,
) -> AutoFound<'s, T> {
    first_giving_a_lane(specs, |spec| {
        auto_lanes(std::slice::from_ref(spec), opts, lane_set)
    })
}

/// What `try_one` found for the first of `specs` that gives a lane, trying them in order (none:
/// no lanes). A device that opened but gave no lane (its calibration never favours it) rules out
/// the rest of its model and driver, which share its calibration; one that failed to open does
/// not (another of its model may be sound).
fn first_giving_a_lane<'s, T: Sample>(
    specs: &'s [LaneSpec],
    mut try_one: impl FnMut(&'s LaneSpec) -> AutoFound<'s, T>,
) -> AutoFound<'s, T> {
    let model = |spec: &LaneSpec| match spec.device {
        LaneDevice::OpenCl(e) => (e.info.name.as_str(), e.info.driver.as_str()),
        LaneDevice::Cpu => ("cpu", ""),
    };
    let mut ruled_out = Vec::new();
    for spec in specs {
        if ruled_out.contains(&model(spec)) {
            continue;
        }
        let found = try_one(spec);
        if !found.lanes.is_empty() {
            return found;
        }
        if !found.others.is_empty() {
            ruled_out.push(model(spec));
        }
    }
    AutoFound::none()
}

/// The GPU-type devices `auto` may use, strongest first (what was found is remembered only
/// when the devices could be listed).
fn auto_gpu_specs() -> Vec<LaneSpec> {
    let listed = device_set::resolve(&DeviceChoice::Auto);
    let specs: Vec<LaneSpec> = (listed.iter().flatten())
        .filter(|s| matches!(s.device, LaneDevice::OpenCl(e) if e.info.is_gpu))
        .cloned()
        .collect();
    if listed.is_ok() {
        kinds::remember_auto(!specs.is_empty());
        route::gpu_view::remember(&DeviceChoice::Auto);
    }
    specs
}

/// `auto`'s GPU lanes for file input (built while the CPU engines already run) on the devices of
/// `specs` (GPU-type only), with a cached calibration.
fn auto_gpu_lanes<T: Sample>(
    specs: &[LaneSpec],
    opts: &RouterOptions,
    lane_set: &Arc<LaneSet>,
) -> LateLanes<T> {
    let AutoFound {
        mut lanes,
        calibration: cal,
        others,
    } = auto_lanes(specs, opts, lane_set);
    if lanes.is_empty() {
        // a file job whose record says the GPU helps (`route::record`) takes the other GPUs too:
        // the lanes' queues share the work by how fast they drain
        lanes = others
            .into_iter()
            .map(|(spec, gpus)| routed_lane(spec, gpus, lane_set))
            .collect();
    }
    if lanes.is_empty() {
        tracing::debug!("auto: no GPU lane joins; the CPU engines do the work");
    }
    reserve_later_devices(&DeviceChoice::Auto, &lanes);
    LateLanes {
        lanes,
        error: None,
        cpu_speed: cal.map(|c| LaneSpeed::cpu(c, opts.workers)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::cpu_lane;
    use super::*;

    fn spec() -> LaneSpec {
        LaneSpec {
            device: LaneDevice::Cpu,
            instance: 1,
            listed: 1,
        }
    }

    /// What a device gave: a lane, opened but no lane, or nothing (it failed to open).
    #[derive(Clone, Copy)]
    enum Gave {
        Lane,
        NoLane,
        Failed,
    }

    /// The devices `first_giving_a_lane` tried, when each gives what `gives` says.
    fn tried(gives: &[Gave]) -> (usize, bool) {
        let specs: Vec<LaneSpec> = gives.iter().map(|_| spec()).collect();
        let mut calls = 0;
        let found = first_giving_a_lane::<f32>(&specs, |s| {
            let gave = gives[calls];
            calls += 1;
            AutoFound {
                lanes: match gave {
                    Gave::Lane => vec![cpu_lane(1)],
                    _ => Vec::new(),
                },
                calibration: None,
                others: match gave {
                    Gave::NoLane => vec![(s, Vec::new())],
                    _ => Vec::new(),
                },
            }
        });
        (calls, !found.lanes.is_empty())
    }

    #[test]
    fn live_auto_stops_at_the_first_device_that_gives_a_lane() {
        assert_eq!(tried(&[Gave::Lane, Gave::Lane, Gave::Lane]), (1, true));
        assert_eq!(tried(&[Gave::Failed, Gave::Lane, Gave::Lane]), (2, true));
        assert_eq!(tried(&[Gave::Failed, Gave::Failed]), (2, false));
    }

    #[test]
    fn a_device_its_calibration_turns_down_rules_out_its_model() {
        // (the specs here are all one model)
        assert_eq!(tried(&[Gave::NoLane, Gave::Lane, Gave::Lane]), (1, false));
    }
}
