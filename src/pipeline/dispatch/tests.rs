//! The dispatcher's tests: shares by speed, retired and failed lanes, the window, stalls.
use super::*;
use crate::fft::calibrate::Calibration;
use crate::fft::route::SpeedSide;
use crate::fft::{EngineError, HostBuf, Scale};
use crate::types::InputKind;
use crate::window::WindowKind;
use crossbeam_channel::RecvTimeoutError;
use crossbeam_channel::TryRecvError;
use std::sync::atomic::Ordering;

fn batch(id: u64) -> Batch<f32> {
    Batch {
        id,
        spec: TransformSpec {
            n: 1024,
            kind: InputKind::Real,
            window: WindowKind::Hann,
            scale: Scale::Magnitude,
            rate: 1.0,
        },
        frames: Vec::new(),
        data: HostBuf::heap(0),
        samples: crate::fft::Carry::Run,
        step: 1024,
    }
}

/// A lane whose device takes `seconds` per batch (from a one-point calibration).
fn measured(seconds: f64) -> LaneSpeed {
    LaneSpeed::Measured(
        Calibration::of_points(&[(1024, 1.0, seconds)]),
        SpeedSide::OpenCl,
    )
}

fn lane(label: &str) -> Arc<Lane> {
    Lane::new(label.into(), "dev".into(), false, 1)
}

/// Sends `count` batches, each to the lane `choose` names; how many each lane got.
fn spread(d: &Dispatcher<f32>, count: u64, lanes: usize) -> Vec<usize> {
    let waited = AtomicU64::new(0);
    let mut got = vec![0; lanes];
    for id in 0..count {
        let b = batch(id);
        let meant = d.choose(&b.spec, 1);
        assert!(d.send(b, meant, &waited));
        got[meant] += 1;
    }
    got
}

#[test]
fn batches_go_in_proportion_to_measured_speed() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let _producer = d.producer();
    let fast = d.add_lane(lane("fast"), measured(1.0), 100, |_| {});
    let slow = d.add_lane(lane("slow"), measured(3.0), 100, |_| {});
    assert!(fast.is_some() && slow.is_some());
    assert_eq!(spread(&d, 40, 2), vec![30, 10]);
}

/// `auto`'s lanes (`router::build_lanes`): a CPU lane beside a device, both timed by one
/// calibration in which the CPU is faster for small frames and the device for large ones. Each
/// batch goes where it is predicted to finish first: what each device worker once decided for
/// itself (a per-batch policy in the routed engine) is the dispatcher's one decision now.
#[test]
fn auto_s_cpu_lane_takes_the_batches_the_calibration_gives_the_cpu() {
    let cal = Calibration::of_points(&[(256, 1e-6, 50e-6), (65536, 2e-3, 0.1e-3)]);
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let _producer = d.producer();
    let cpu_speed = LaneSpeed::Measured(cal.clone(), SpeedSide::Cpu { workers: 2 });
    let on_cpu = d.add_lane(lane("cpu"), cpu_speed, 100, |_| {});
    let gpu_speed = LaneSpeed::Measured(cal, SpeedSide::OpenCl);
    let on_gpu = d.add_lane(lane("gpu"), gpu_speed, 100, |_| {});
    assert!(on_cpu.is_some() && on_gpu.is_some());
    let spec = |n| TransformSpec { n, ..batch(0).spec };
    assert_eq!(d.choose(&spec(256), 1), 0, "small frames: the CPU lane");
    assert_eq!(d.choose(&spec(65536), 1), 1, "large frames: the device");
}

#[test]
fn a_retired_lane_takes_no_new_batches() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let _producer = d.producer();
    let cpu = lane("cpu");
    // the queues' receivers kept: a dropped one would leave a lane that takes nothing
    let on_cpu = d.add_lane(cpu.clone(), LaneSpeed::Even, 100, |_| {});
    let on_gpu = d.add_lane(lane("gpu"), LaneSpeed::Even, 100, |_| {});
    assert!(on_cpu.is_some() && on_gpu.is_some());
    cpu.retire();
    assert_eq!(spread(&d, 10, 2), vec![0, 10]);
}

#[test]
fn a_full_queue_is_skipped_and_a_failed_lane_hands_off() {
    let lane_set = LaneSet::new(true);
    let (d, ended) = Dispatcher::<f32>::new(lane_set.clone());
    let producer = d.producer();
    let (a, b) = (lane("a"), lane("b"));
    let (ia, rx_a) = d
        .add_lane(a.clone(), LaneSpeed::Even, 1, |_| {})
        .expect("a");
    let (ib, rx_b) = d
        .add_lane(b.clone(), LaneSpeed::Even, 1, |_| {})
        .expect("b");
    let waited = AtomicU64::new(0);
    assert!(d.send(batch(0), ia, &waited));
    // a's queue is full: the batch meant for a goes to b
    assert!(d.send(batch(1), ia, &waited));
    assert_eq!(rx_b.try_recv().map(|b| b.id).ok(), Some(1));
    d.finished(ib, 1);
    // a fails: its batch goes to b, new batches skip a
    let lost = EngineError::Device {
        engine: "opencl",
        what: "lost".into(),
    };
    lane_set.fail(&a, &lost);
    let held = rx_a.try_recv().expect("a's batch");
    assert!(d.hand_off(held, ia).is_ok());
    assert_eq!(a.counters.handed_off.load(Ordering::Relaxed), 1);
    assert_eq!(d.choose(&batch(2).spec, 1), ib);
    assert_eq!(rx_b.try_recv().map(|b| b.id).ok(), Some(0));
    // b fails too: nobody takes a's batches any more
    lane_set.fail(&b, &lost);
    assert!(d.hand_off(batch(3), ia).is_err());
    // the queues close once the producer has ended and every batch is finished
    drop(producer);
    assert!(
        matches!(
            ended.try_recv(),
            Err(crossbeam_channel::TryRecvError::Empty)
        ),
        "batch 0 is not finished yet"
    );
    d.finished(ib, 0);
    assert!(matches!(
        ended.recv_timeout(Duration::from_secs(1)),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected)
    ));
    assert!(rx_a.recv().is_err() && rx_b.recv().is_err());
    assert!(d
        .add_lane(lane("late"), LaneSpeed::Even, 1, |_| {})
        .is_none());
}

/// Two lanes of one worker and a queue of one; `a` takes batch 0 and never finishes it, `b`
/// finishes everything it gets at once (on a thread of its own until its queue closes).
fn one_stuck_lane(
    d: &Arc<Dispatcher<f32>>,
) -> (LaneId, Receiver<Batch<f32>>, std::thread::JoinHandle<()>) {
    let (ia, rx_a) = d
        .add_lane(lane("a"), LaneSpeed::Even, 1, |_| {})
        .expect("a");
    let (ib, rx_b) = d
        .add_lane(lane("b"), LaneSpeed::Even, 1, |_| {})
        .expect("b");
    let waited = AtomicU64::new(0);
    assert!(d.send(batch(0), ia, &waited));
    let stuck = rx_a.try_recv().expect("batch 0");
    d.received(ia, stuck.id);
    let worker = d.clone();
    let b = std::thread::spawn(move || {
        for got in rx_b.iter() {
            worker.received(ib, got.id);
            worker.finished(ib, got.id);
        }
    });
    (ia, rx_a, b)
}

#[test]
fn a_batch_a_window_ahead_of_a_stuck_one_waits_for_it() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let d = Arc::new(d);
    let producer = d.producer();
    let (ia, _rx_a, b) = one_stuck_lane(&d);
    // 2 lanes holding 2 each, 1 producer: 4 x 5
    let window = d.lock().window();
    assert_eq!(window, 20);
    let waited = AtomicU64::new(0);
    // a's queue is full (it holds batch 0 and has one more queued): the rest go to b
    for id in 1..window {
        assert!(d.send(batch(id), ia, &waited), "batch {id}");
    }
    let (sent_tx, sent_rx) = crossbeam_channel::bounded(1);
    let sender = d.clone();
    let late = std::thread::spawn(move || {
        let waited = AtomicU64::new(0);
        let _ = sent_tx.send(sender.send(batch(window), 0, &waited));
    });
    assert!(
        sent_rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "batch {window} is a window ahead of batch 0: it waits"
    );
    d.finished(ia, 0);
    assert_eq!(
        sent_rx.recv_timeout(Duration::from_secs(5)).ok(),
        Some(true)
    );
    let _ = late.join();
    d.abandon();
    drop(producer);
    let _ = b.join();
}

#[test]
fn batch_numbers_settle_in_any_order_and_a_skipped_one_holds_nobody_back() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let _producer = d.producer();
    assert!(d.add_lane(lane("a"), LaneSpeed::Even, 1, |_| {}).is_some());
    let window = d.lock().window();
    assert!(!d.lock().within_window(window));
    // batch 0 is never sent (its producer failed): it is skipped
    d.skip(0);
    assert!(d.lock().within_window(window));
    let mut state = d.lock();
    state.settle(2);
    assert_eq!(state.oldest, 1, "batch 1 is not finished");
    state.settle(1);
    assert_eq!(state.oldest, 3);
    assert!(state.finished_above.is_empty());
}

#[test]
fn a_stalled_lane_is_given_up_after_an_interrupt_and_its_followers_released() {
    let (d, ended) = Dispatcher::<f32>::new(LaneSet::new(true));
    let mut d = d;
    d.stall_after = Duration::from_millis(50);
    let d = Arc::new(d);
    let producer = d.producer();
    let (ia, _rx_a, b) = one_stuck_lane(&d);
    let waited = AtomicU64::new(0);
    for id in 1..5 {
        assert!(d.send(batch(id), 1, &waited));
    }
    let abandoned = d.abandoned();
    let (stop, interrupted) = (AtomicBool::new(true), AtomicBool::new(true));
    let watcher = d.clone();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let flags = StopFlags {
                stop: &stop,
                interrupted: &interrupted,
            };
            watcher.watch(&ended, flags)
        });
        // batch 0 is the oldest: the stage after the workers stops waiting at once
        assert!(matches!(
            abandoned.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected)
        ));
    });
    let given_up = d.given_up();
    assert_eq!(given_up.len(), 1);
    assert_eq!((given_up[0].0, given_up[0].2), (ia, 0));
    assert!(
        !d.send(batch(5), 1, &waited),
        "no lane takes batches any more"
    );
    drop(producer);
    let _ = b.join();
}
#[test]
fn a_computed_batch_waiting_for_the_output_is_no_stall_but_stays_in_the_window() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let _producer = d.producer();
    let (ia, rx_a) = d
        .add_lane(lane("a"), LaneSpeed::Even, 1, |_| {})
        .expect("a");
    let waited = AtomicU64::new(0);
    assert!(d.send(batch(0), ia, &waited));
    let got = rx_a.try_recv().expect("batch 0");
    d.received(ia, got.id);
    // computed, then blocked on a slow stage after the workers
    d.computed(ia, got.id);
    let window = d.lock().window();
    let mut state = d.lock();
    let (now, long_ago) = (Instant::now(), Instant::now() - Duration::from_secs(60));
    state.warn_stalls(now + Duration::from_secs(60), Duration::from_millis(1));
    assert!(state.lanes[ia].warned.is_none(), "no stall warning");
    state.give_up_stalled(now + Duration::from_secs(60), long_ago, Duration::ZERO);
    assert!(state.given_up.is_none() && !state.closed, "not given up");
    assert_eq!(state.oldest, 0, "still unfinished");
    assert!(!state.within_window(window), "and still holds the window");
    drop(state);
    d.finished(ia, got.id);
    assert!(d.lock().within_window(window));
}

#[test]
fn a_batch_dropped_when_a_give_up_closes_the_queues_lowers_the_cut() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let producer = d.producer();
    let (ia, rx_a) = d
        .add_lane(lane("a"), LaneSpeed::Even, 1, |_| {})
        .expect("a");
    let waited = AtomicU64::new(0);
    // a producer still fills batch 0 while batch 1 hangs on the device
    assert!(d.send(batch(1), ia, &waited));
    let stuck = rx_a.try_recv().expect("batch 1");
    d.received(ia, stuck.id);
    let abandoned = d.abandoned();
    let now = Instant::now();
    d.lock().give_up_stalled(now, now, Duration::ZERO);
    assert_eq!(d.cut(), Some(1));
    assert!(
        matches!(abandoned.try_recv(), Err(TryRecvError::Empty)),
        "batch 0 is not settled yet"
    );
    // the queues are closed: batch 0 is dropped, and the output ends before it
    assert!(!d.send(batch(0), ia, &waited));
    assert_eq!(d.cut(), Some(0));
    assert!(matches!(
        abandoned.try_recv(),
        Err(TryRecvError::Disconnected)
    ));
    drop(producer);
}

#[test]
fn a_panic_while_a_lane_hangs_releases_the_stage_after_the_workers() {
    let (d, ended) = Dispatcher::<f32>::new(LaneSet::new(true));
    let d = Arc::new(d);
    let producer = d.producer();
    let (_ia, _rx_a, b) = one_stuck_lane(&d);
    let abandoned = d.abandoned();
    assert!(matches!(abandoned.try_recv(), Err(TryRecvError::Empty)));
    // another worker panics (`AbandonOnPanic`): nothing gave lane a up
    d.abandon();
    assert!(d.was_abandoned() && d.given_up().is_empty());
    assert!(matches!(
        abandoned.try_recv(),
        Err(TryRecvError::Disconnected)
    ));
    assert!(matches!(ended.try_recv(), Err(TryRecvError::Disconnected)));
    // the watch ends too
    let (stop, interrupted) = (AtomicBool::new(false), AtomicBool::new(false));
    let flags = StopFlags {
        stop: &stop,
        interrupted: &interrupted,
    };
    d.watch(&ended, flags);
    drop(producer);
    let _ = b.join();
}

/// Room in a queue goes to the oldest batch waiting for it, not to a producer that comes with a
/// newer batch before the waiting one has woken (it held every later batch in the sink).
#[test]
fn room_goes_to_the_oldest_waiting_batch() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let d = Arc::new(d);
    let producer = d.producer();
    let Some((ia, rx)) = d.add_lane(lane("a"), measured(1.0), 1, |_| {}) else {
        panic!("lane")
    };
    let waited = AtomicU64::new(0);
    assert!(d.send(batch(0), ia, &waited));
    let send_in_background = |id: u64| {
        let sender = d.clone();
        std::thread::spawn(move || sender.send(batch(id), 0, &AtomicU64::new(0)))
    };
    let waits = |id: u64| wait_until_waiting(&d, id);
    let older = send_in_background(1);
    waits(1);
    // room appears with no wake-up yet, and a newer batch comes: it must not take it
    assert_eq!(rx.try_recv().map(|b| b.id).ok(), Some(0));
    let newer = send_in_background(2);
    waits(2);
    d.received(ia, 0);
    assert_eq!(next_id(&rx), Some(1), "the older batch first");
    d.received(ia, 1);
    assert_eq!(next_id(&rx), Some(2));
    assert!(older.join().unwrap_or(false) && newer.join().unwrap_or(false));
    d.abandon();
    drop(producer);
}

/// A newer batch does not wait behind an older waiting one while the queues have room for
/// both: producers place at once instead of one wake-up at a time (16 CPU workers were fed at
/// half their rate when every placement waited for the oldest producer to wake).
#[test]
fn a_newer_batch_goes_ahead_while_there_is_room_for_every_older_one() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let _producer = d.producer();
    let Some((ia, _rx)) = d.add_lane(lane("a"), measured(1.0), 2, |_| {}) else {
        panic!("lane")
    };
    d.lock().waiting.insert(1);
    assert!(d.lock().may_place(1, &[ia]), "the oldest goes first");
    assert!(
        d.lock().may_place(2, &[ia]),
        "two rooms: one for 1, one for 2"
    );
    assert!(d.send(batch(0), ia, &AtomicU64::new(0)));
    assert!(
        !d.lock().may_place(2, &[ia]),
        "one room: batch 1's, though 2 asks first"
    );
    assert!(d.lock().may_place(1, &[ia]));
}

/// The rooms a newer batch counts are those of every lane it may go to, summed.
#[test]
fn the_rooms_counted_are_those_of_every_lane_a_batch_may_take() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let _producer = d.producer();
    let (Some((ia, _ra)), Some((ib, _rb))) = (
        d.add_lane(lane("a"), measured(1.0), 1, |_| {}),
        d.add_lane(lane("b"), measured(1.0), 1, |_| {}),
    ) else {
        panic!("lanes")
    };
    d.lock().waiting.insert(1);
    assert!(d.lock().may_place(2, &[ia, ib]), "a room each: 1's and 2's");
    assert!(
        !d.lock().may_place(2, &[ib]),
        "lane b alone: its room is 1's"
    );
    assert!(d.send(batch(0), ia, &AtomicU64::new(0)));
    assert!(
        !d.lock().may_place(2, &[ia, ib]),
        "a is full: b's room is 1's"
    );
}

/// A failed lane's batch waits in line with the producers' batches: older than a waiting
/// producer's, it takes the first room.
#[test]
fn a_handed_off_batch_takes_room_before_a_newer_waiting_one() {
    let lane_set = LaneSet::new(true);
    let (d, _) = Dispatcher::<f32>::new(lane_set.clone());
    let d = Arc::new(d);
    let producer = d.producer();
    let (a, b) = (lane("a"), lane("b"));
    let (ia, rx_a) = d
        .add_lane(a.clone(), LaneSpeed::Even, 1, |_| {})
        .expect("a");
    let (ib, rx_b) = d.add_lane(b, LaneSpeed::Even, 1, |_| {}).expect("b");
    let waited = AtomicU64::new(0);
    assert!(d.send(batch(0), ia, &waited));
    assert!(d.send(batch(1), ib, &waited));
    let lost = EngineError::Device {
        engine: "opencl",
        what: "lost".into(),
    };
    lane_set.fail(&a, &lost);
    let waits = |id: u64| wait_until_waiting(&d, id);
    let sender = d.clone();
    let newer = std::thread::spawn(move || sender.send(batch(2), ib, &AtomicU64::new(0)));
    waits(2);
    let held = rx_a.try_recv().expect("a's batch");
    let handing = d.clone();
    let handed = std::thread::spawn(move || handing.hand_off(held, ia).is_ok());
    waits(0);
    assert_eq!(rx_b.try_recv().map(|b| b.id).ok(), Some(1));
    d.received(ib, 1);
    assert_eq!(next_id(&rx_b), Some(0), "the handed-off batch first");
    d.received(ib, 0);
    assert_eq!(next_id(&rx_b), Some(2));
    assert!(handed.join().unwrap_or(false) && newer.join().unwrap_or(false));
    d.abandon();
    drop(producer);
}

/// A batch in heap memory filled for the CPU lane waits for the CPU lane's room, retired or
/// not, rather than cross to a device through staging blocks pinned while the device works
/// (issue 41's hand-over); a batch meant for the device still goes wherever there is room.
#[test]
fn a_heap_batch_meant_for_the_cpu_lane_waits_for_it_rather_than_go_to_a_device() {
    let (d, _) = Dispatcher::<f32>::new(LaneSet::new(true));
    let d = Arc::new(d);
    let producer = d.producer();
    let cpu = Lane::new("cpu".into(), "CPU engine".into(), true, 1);
    let Some((on_cpu, cpu_rx)) = d.add_lane(cpu.clone(), LaneSpeed::Even, 1, |_| {}) else {
        panic!("cpu lane")
    };
    let Some((on_gpu, gpu_rx)) = d.add_lane(lane("gpu"), LaneSpeed::Even, 10, |_| {}) else {
        panic!("device lane")
    };
    let waited = AtomicU64::new(0);
    // meant for the device, whose queue is full: the CPU lane's room takes it
    for id in 0..10 {
        assert!(d.send(batch(id), on_gpu, &waited));
    }
    assert!(d.send(batch(10), on_gpu, &waited));
    assert_eq!(next_id(&cpu_rx), Some(10));
    d.received(on_cpu, 10);
    for id in 0..10 {
        assert_eq!(next_id(&gpu_rx), Some(id));
        d.received(on_gpu, id);
    }
    // in heap memory meant for the CPU lane, whose queue is full: it waits for it
    assert!(d.send(batch(11), on_cpu, &waited));
    cpu.retire(); // (the device has returned its first batch)
    let sender = d.clone();
    let waits = std::thread::spawn(move || sender.send(batch(12), on_cpu, &AtomicU64::new(0)));
    wait_until_waiting(&d, 12);
    assert!(
        gpu_rx.try_recv().is_err(),
        "the device's lane got a heap batch"
    );
    assert_eq!(next_id(&cpu_rx), Some(11));
    d.received(on_cpu, 11);
    assert_eq!(
        next_id(&cpu_rx),
        Some(12),
        "the retired CPU lane computes it"
    );
    assert!(waits.join().unwrap_or(false));
    d.abandon();
    drop(producer);
}

/// The number of the next batch a lane's queue gives (waiting at most 5 s).
fn next_id(rx: &Receiver<Batch<f32>>) -> Option<u64> {
    rx.recv_timeout(Duration::from_secs(5)).map(|b| b.id).ok()
}

/// Returns once batch `id`'s producer waits for room (at most 5 s).
fn wait_until_waiting(d: &Dispatcher<f32>, id: u64) {
    let since = Instant::now();
    while !d.lock().waiting.contains(&id) {
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "batch {id} never waited"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
