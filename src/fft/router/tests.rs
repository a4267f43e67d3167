//! The router's hand-over of devices as they come, with no device: a lane spec of the CPU
//! engine is one `open_engines` cannot open ("not an OpenCL device").

use super::*;
use crate::fft::device_choice::DeviceChoice;
use crate::fft::lanes::LaterDevices;

fn unopenable() -> LaneSpec {
    LaneSpec {
        device: LaneDevice::Cpu,
        instance: 1,
        listed: 1,
    }
}

#[test]
fn a_device_in_reserve_that_cannot_open_warns_and_the_first_one_fails_the_run() {
    let lane_set = LaneSet::new(true);
    let opts = RouterOptions::new(DeviceChoice::AllGpus, 1);
    let specs = [(0, unopenable()), (1, unopenable())];
    let arrived: Mutex<Vec<Option<String>>> = Mutex::new(Vec::new());
    let arrive = |late: LateLanes<f32>| {
        let error = late.error.map(|e| e.to_string());
        arrived.lock().expect("arrivals").push(error);
    };
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| open_as_they_come(&opts, &lane_set, &specs, &arrive));
        // the second waits in reserve until it is wanted
        let since = std::time::Instant::now();
        while !lane_set.later_devices_wait() {
            let waited = since.elapsed();
            assert!(
                waited.as_secs() < 60,
                "the second device never waited in reserve"
            );
            std::thread::yield_now();
        }
        lane_set.decide_later_devices(LaterDevices::Wanted, "wanted".into());
        waiting.join().expect("opened");
    });
    let arrived = arrived.into_inner().expect("arrivals");
    assert_eq!(arrived.len(), 1, "only the first arrives: {arrived:?}");
    let first = arrived[0].as_deref().unwrap_or_default();
    assert!(first.contains("not an OpenCL device"), "{first}");
    let report = lane_set.later_devices_report().unwrap_or_default();
    assert!(
        report.starts_with("wanted: wanted; ") && report.contains("could not be opened"),
        "{report}"
    );
}
