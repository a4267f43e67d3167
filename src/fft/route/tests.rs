//! The routing decisions from plain values: no device, no cache folder.

use super::record::{AutoRoute, RouteRecord};
use super::*;
use crate::fft::calibrate::Calibration;
use std::sync::Arc;

fn facts(choice: &str, live: bool) -> Facts {
    Facts {
        choice: choice.parse().expect("a valid --device"),
        live,
        faults: false,
        gpus_alone: true,
        record: None,
    }
}

#[test]
fn named_gpus_start_in_the_background_on_file_input_only() {
    assert_eq!(plan(&facts("gpu", false)), Start::Bridged);
    assert_eq!(plan(&facts("gpu:all", false)), Start::Bridged);
    assert_eq!(
        plan(&facts("gpu", true)),
        Start::Opened,
        "live: capture waits for nothing"
    );
    assert_eq!(plan(&facts("cpu", false)), Start::Opened);
    let pocl = Facts {
        gpus_alone: false,
        ..facts("gpu", false)
    };
    assert_eq!(plan(&pocl), Start::Opened, "not known to be a GPU");
    let faults = Facts {
        faults: true,
        ..facts("gpu", false)
    };
    assert_eq!(
        plan(&faults),
        Start::Opened,
        "fault injection counts from batch 0"
    );
    assert!(Start::Bridged.retires_cpu() && Start::Bridged.builds_late());
    assert!(!Start::Opened.retires_cpu() && !Start::Opened.builds_late());
    assert_eq!(Start::Bridged.auto_route(), None);
}

#[test]
fn auto_without_a_record_runs_the_cpu_engines_and_a_new_job_tries_the_gpu_alone() {
    assert_eq!(
        plan(&facts("auto", true)),
        Start::Opened,
        "live auto opens first"
    );
    let no_record = plan(&facts("auto", false));
    assert_eq!(no_record.auto_route(), Some(AutoRoute::CpuOnly));
    assert!(!no_record.builds_late() && !no_record.retires_cpu());
    let new_job = Facts {
        record: Some(RouteRecord::default()),
        ..facts("auto", false)
    };
    let start = plan(&new_job);
    assert_eq!(start.auto_route(), Some(AutoRoute::GpuOnly));
    assert!(start.builds_late() && start.retires_cpu());
}

#[test]
fn a_device_start_up_in_the_background_begins_only_if_it_can_pay_for_auto_too() {
    let auto = |route| Start::Auto {
        route,
        shares: None,
    };
    for start in [
        Start::Bridged,
        auto(AutoRoute::GpuOnly),
        auto(AutoRoute::WithGpu),
    ] {
        assert!(start.begins_devices_only_if_they_pay(), "{start:?}");
    }
    for start in [Start::Opened, auto(AutoRoute::CpuOnly)] {
        assert!(
            !start.begins_devices_only_if_they_pay(),
            "{start:?}: none begins"
        );
    }
}

fn calibration(cpu_s: f64, gpu_s: f64) -> Arc<Calibration> {
    Calibration::of_points(&[(1024, cpu_s, gpu_s)])
}

#[test]
fn the_lane_predicted_to_finish_first_takes_the_batch() {
    let cal = calibration(4.0, 1.0);
    let (gpu, cpu) = (
        LaneSpeed::Measured(cal.clone(), SpeedSide::OpenCl),
        LaneSpeed::cpu(cal, 2),
    );
    let lanes = |gpu_backlog| {
        [
            LaneLoad {
                speed: &cpu,
                unfinished: 0,
                holds: 4,
                device: false,
                reserve: false,
            },
            LaneLoad {
                speed: &gpu,
                unfinished: gpu_backlog,
                holds: 4,
                device: true,
                reserve: false,
            },
        ]
    };
    // the CPU lane takes 2 s per batch (4 s over 2 workers), the device 1 s
    assert_eq!(rank(&lanes(0), &[0, 1], 1024, 1), vec![1, 0]);
    assert_eq!(
        rank(&lanes(1), &[0, 1], 1024, 1),
        vec![0, 1],
        "2 s each: the order given"
    );
    assert_eq!(
        rank(&lanes(2), &[0, 1], 1024, 1),
        vec![0, 1],
        "3 s behind its backlog"
    );
    assert_eq!(
        rank(&lanes(0), &[0], 1024, 1),
        vec![0],
        "only the candidates"
    );
}

#[test]
fn speeds_measured_differently_count_as_equal_and_backlogs_decide() {
    let (fast, rate) = (
        LaneSpeed::Measured(calibration(4.0, 0.001), SpeedSide::OpenCl),
        LaneSpeed::Rate(1.0),
    );
    let lanes = [
        LaneLoad {
            speed: &rate,
            unfinished: 0,
            holds: 4,
            device: true,
            reserve: false,
        },
        LaneLoad {
            speed: &fast,
            unfinished: 1,
            holds: 4,
            device: true,
            reserve: false,
        },
    ];
    assert_eq!(rank(&lanes, &[0, 1], 1024, 4), vec![0, 1]);
    let shares = [
        LaneLoad {
            speed: &LaneSpeed::Rate(3.0),
            unfinished: 2,
            holds: 4,
            device: true,
            reserve: false,
        },
        LaneLoad {
            speed: &LaneSpeed::Rate(1.0),
            unfinished: 0,
            holds: 4,
            device: true,
            reserve: false,
        },
    ];
    // by the record's rates: 3 × 1/3 against 1 × 1: equal, the first given first
    assert_eq!(rank(&shares, &[0, 1], 1, 1), vec![0, 1]);
}

#[test]
fn a_lane_in_reserve_takes_batches_only_while_the_others_are_full() {
    let even = LaneSpeed::Even;
    let load = |unfinished, device, reserve| LaneLoad {
        speed: &even,
        unfinished,
        holds: 3,
        device,
        reserve,
    };
    let lanes = |first: u64, second: u64| [load(first, true, false), load(second, true, true)];
    // the first GPU keeps up (room in its queue): the second waits, though idle
    assert_eq!(rank(&lanes(0, 0), &[0, 1], 4096, 64), vec![0, 1]);
    assert_eq!(rank(&lanes(2, 0), &[0, 1], 4096, 64), vec![0, 1]);
    // the first is full: the second joins, by backlog as any lane
    assert_eq!(rank(&lanes(3, 0), &[0, 1], 4096, 64), vec![1, 0]);
    assert_eq!(rank(&lanes(3, 3), &[0, 1], 4096, 64), vec![0, 1]);
    // the first failed (no longer a candidate): the second takes every batch
    assert_eq!(rank(&lanes(0, 1), &[1], 4096, 64), vec![1]);
    // the CPU engines' lane (index 2 here) holds no GPU back: with the first GPU full, the
    // reserve and the CPU lane rank by backlog; before the first GPU has come up the same
    let with_cpu = |first: u64| {
        [
            load(first, true, false),
            load(0, true, true),
            load(1, false, false),
        ]
    };
    assert_eq!(rank(&with_cpu(3), &[0, 1, 2], 4096, 64), vec![1, 2, 0]);
    assert_eq!(rank(&with_cpu(0), &[0, 1, 2], 4096, 64), vec![0, 2, 1]);
    assert_eq!(rank(&with_cpu(0), &[1, 2], 4096, 64), vec![1, 2]);
    // only under gpu:all and auto; devices listed outright share by backlog
    let reserve = |c: &str| later_devices_in_reserve(&c.parse().expect("a valid --device"));
    assert!(reserve("gpu:all") && reserve("auto"));
    assert!(!reserve("gpu") && !reserve("opencl:0:0,opencl:0:0") && !reserve("cpu"));
    // the first device never waits
    let all = "gpu:all".parse().expect("a valid --device");
    assert!(!waits_in_reserve(&all, 0) && waits_in_reserve(&all, 1) && waits_in_reserve(&all, 2));
}

#[test]
fn a_device_in_reserve_starts_only_when_the_first_bounds_a_run_with_time_left_to_pay() {
    let demand = |busy: f64, left_ms: Option<u64>| Demand {
        busy,
        left: left_ms.map(Duration::from_millis),
        start_up: Duration::from_millis(500),
    };
    let pays = |busy, left| another_device_pays(&demand(busy, left));
    // the host paces the run (issue 41's 10-34 % busy devices): never
    assert!(!pays(0.34, None) && !pays(0.84, Some(60_000)));
    // the first device bounds it: when a second has time to come up and pay for it, or the
    // run's length is unknown (a live input)
    assert!(pays(0.85, None) && pays(0.95, Some(1_501)) && pays(1.0, Some(60_000)));
    assert!(!pays(0.95, Some(1_500)) && !pays(1.0, Some(300)));
}
