//! `--sweep LOW:HIGH:BIN` (issue 42): a source that surveys a band wider than the receiver by
//! retuning it hop after hop, as rtl_power does. It takes a receiver that can be retuned (rtl_tcp
//! or SoapySDR, `SampleSource::retune`) and gives the samples of each hop, each after its retune had
//! effect.
//!
//! The stream is cut into slots of `settle + hop_samples` samples, slot k for hop k mod H. Per
//! slot: retune to the hop's centre (`plan::HopPlan`), read and leave out `settle` samples
//! (receivers acknowledge nothing: the samples already in the dongle's transfers and the server's
//! queue were taken at the old frequency), then give exactly `hop_samples` = (frames − 1) · hop +
//! n samples, which the reader cuts into the hop's frames. Left-out samples are stream time
//! without samples (`take_outage`), so framing restarts after them and no frame straddles two
//! hops. Because every hop starts at a fixed place in its slot, the centre that labels each row
//! (`tuning`: one sweep's captures, repeating) follows from the plan alone.
//!
//! Under `--retry` the receiver may be reopened mid-slot: its outage and what it gave since (at
//! its own tuning) are left out too, up to the next slot's start, and the sweep goes on from that
//! slot's hop, so row times run on by the outage rounded up to a slot. After `sweeps` full sweeps
//! (slots) the input ends; without, it runs until stopped.

pub(crate) mod plan;

use super::{SampleSource, SourceInfo};
use crate::error::Result;
use crate::types::tuning::{BandGrid, Capture, Tuning};
use plan::HopPlan;
use std::sync::Arc;

/// When and for how long each hop is read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SweepSchedule {
    pub(crate) plan: HopPlan,
    /// Samples left out after each retune.
    pub(crate) settle: u64,
    /// Samples each hop gives: (frames − 1) · hop + n.
    pub(crate) hop_samples: u64,
    /// Full sweeps to make; None: until stopped.
    pub(crate) sweeps: Option<u64>,
}

impl SweepSchedule {
    /// Samples from one hop's retune to the next.
    fn slot(&self) -> u64 {
        self.settle + self.hop_samples
    }

    /// Where each hop's analysed samples begin in the stream, and its centre: one sweep's
    /// captures, repeating every sweep.
    pub(crate) fn tuning(&self) -> Arc<Tuning> {
        let captures = (self.plan.centres.iter().enumerate())
            .map(|(i, &centre)| Capture {
                sample_start: i as u64 * self.slot() + self.settle,
                frequency: Some(centre),
                datetime: None,
            })
            .collect();
        let hops = self.plan.hops() as u64;
        let (lowest, _) = self.plan.written_offsets();
        let band = BandGrid {
            low: self.plan.centres[0] + lowest,
            step: self.plan.step,
            bins: self.plan.total_bins,
            hops: self.plan.hops(),
            per_hop: self.plan.bins_per_hop,
        };
        Arc::new(Tuning {
            captures,
            period: (hops > 1).then(|| hops * self.slot()),
            band: (hops > 1).then_some(band),
        })
    }
}

/// A receiver driven through a sweep.
pub(crate) struct SweepSource {
    receiver: Box<dyn SampleSource>,
    schedule: SweepSchedule,
    /// Stream time so far, in samples (given, left out, lost): where the next sample lies.
    position: u64,
    /// Samples of the current hop still to give (0: the next read starts a slot).
    left: u64,
    /// Samples left out since the reader last asked.
    outage: u64,
    /// Samples the receiver lost inside a hop (overflows) since the reader last asked.
    gap: u64,
    /// Samples read past a hop's end and left out, which lie after the samples given with them:
    /// the reader hears of them with the next read.
    left_out_after: u64,
    scratch: Vec<f64>,
}

impl SweepSource {
    pub(crate) fn new(receiver: Box<dyn SampleSource>, schedule: SweepSchedule) -> Self {
        let p = &schedule.plan;
        tracing::info!(
            "{}: sweep of {} hops, {} of {} bins each ({} Hz apart), {} settle samples per hop",
            receiver.info().name,
            p.hops(),
            p.bins_per_hop,
            p.n,
            crate::types::shown(p.step),
            schedule.settle
        );
        SweepSource {
            receiver,
            schedule,
            position: 0,
            left: 0,
            outage: 0,
            gap: 0,
            left_out_after: 0,
            scratch: Vec::new(),
        }
    }

    /// Stream time without samples given: left out, or lost to an outage.
    fn leave_out(&mut self, samples: u64) {
        self.position += samples;
        self.outage += samples;
    }

    /// Starts the next slot: from its start, retunes and lets the receiver settle. False at the
    /// end of the sweeps or when stopped.
    fn start_slot(&mut self) -> Result<bool> {
        let slot = self.schedule.slot();
        let hops = self.schedule.plan.hops() as u64;
        loop {
            // the slot whose settle still has at least half its length ahead (a hop that
            // overran its end by a read that followed an overflow), else the next one
            let settle = self.schedule.settle;
            let (mut index, into) = (self.position / slot, self.position % slot);
            if into * 2 > settle {
                index += 1;
            }
            if self.schedule.sweeps.is_some_and(|n| index >= n * hops) {
                return Ok(false);
            }
            self.leave_out((index * slot).saturating_sub(self.position));
            let centre = self.schedule.plan.centres[(index % hops) as usize];
            self.receiver.retune(centre)?;
            let left = index * slot + settle - self.position;
            match self.settle(left)? {
                Settled::Yes => break,
                Settled::Stopped => return Ok(false),
                Settled::Reopened => continue, // at the receiver's own tuning: the next slot
            }
        }
        self.left = self.schedule.hop_samples;
        Ok(true)
    }

    /// Reads and leaves out `count` samples.
    fn settle(&mut self, mut count: u64) -> Result<Settled> {
        while count > 0 {
            self.scratch.clear();
            let want = count.min(1 << 16) as usize;
            let got = self.receiver.read(&mut self.scratch, want)? as u64;
            if self.reopened(got) {
                return Ok(Settled::Reopened);
            }
            if got == 0 {
                return Ok(Settled::Stopped);
            }
            // samples the receiver lost before these are settle time too
            let passed = (self.receiver.take_gap() + got).min(count);
            self.leave_out(passed);
            count -= passed;
        }
        Ok(Settled::Yes)
    }

    /// Whether the receiver was reopened (`--retry`) in the last read, which gave `got` samples
    /// after it: the outage and those samples are left out.
    fn reopened(&mut self, got: u64) -> bool {
        let lost = self.receiver.take_outage();
        if lost > 0 {
            self.leave_out(lost + got);
            self.left = 0;
        }
        lost > 0
    }

    /// Samples the receiver lost (an overflow) before the `got` it just gave are stream time of
    /// the hop they fell in, so the hop still ends where its slot says (the reader restarts
    /// framing after them). False when they reach past the hop's end: the hop is over, and what
    /// lies beyond it is left out up to the next slot.
    fn lost_before(&mut self, got: u64) -> bool {
        let gap = self.receiver.take_gap();
        let inside = gap.min(self.left);
        self.position += inside;
        self.left -= inside;
        self.gap += inside;
        if gap > 0 && self.left == 0 {
            self.leave_out(gap - inside + got);
            return false;
        }
        true
    }
}

/// How a settle ended.
enum Settled {
    Yes,
    Stopped,
    Reopened,
}

impl SampleSource for SweepSource {
    fn info(&self) -> &SourceInfo {
        self.receiver.info()
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        self.outage += std::mem::take(&mut self.left_out_after);
        loop {
            if self.left == 0 && !self.start_slot()? {
                return Ok(0);
            }
            let start = out.len();
            let want = (max_frames.max(1) as u64).min(self.left) as usize;
            let got = self.receiver.read(out, want)?;
            if self.reopened(got as u64) {
                out.truncate(start);
                continue;
            }
            if !self.lost_before(got as u64) {
                out.truncate(start);
                continue;
            }
            // what came after an overflow beyond the hop's end is the next slot's settle
            let given = (got as u64).min(self.left);
            let info = self.receiver.info();
            out.truncate(start + given as usize * info.channels * info.kind.width());
            self.position += got as u64;
            self.left_out_after += got as u64 - given;
            self.left -= given;
            return Ok(given as usize);
        }
    }

    fn take_outage(&mut self) -> u64 {
        std::mem::take(&mut self.outage)
    }

    fn take_gap(&mut self) -> u64 {
        std::mem::take(&mut self.gap)
    }

    fn take_decode_ns(&mut self) -> u64 {
        self.receiver.take_decode_ns()
    }

    fn tuning(&self) -> Option<Arc<Tuning>> {
        Some(self.schedule.tuning())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::InputKind;
    use std::sync::Mutex;

    /// A receiver whose samples are (its sample count, its tuning count), so a test sees which
    /// samples were given and after which retune; `outage_at`: at this sample count, it is
    /// "reopened" after an outage of that many samples (as `--retry` reports one).
    struct Counting {
        info: SourceInfo,
        next: u64,
        tunings: Arc<Mutex<Vec<f64>>>,
        outage_at: Option<(u64, u64)>,
        outage: u64,
        /// At the read that starts at or after this sample count, it lost this many (an
        /// overflow, reported by `take_gap` after the read).
        gap_at: Option<(u64, u64)>,
        gap: u64,
    }

    impl SampleSource for Counting {
        fn info(&self) -> &SourceInfo {
            &self.info
        }
        fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
            let n = max_frames.min(7); // short reads, as a socket gives
            if let Some((_, lost)) = self.gap_at.filter(|g| self.next >= g.0) {
                self.gap = lost;
                self.gap_at = None;
            }
            for _ in 0..n {
                if let Some((_, lost)) = self.outage_at.filter(|o| o.0 == self.next) {
                    self.outage = lost;
                    self.outage_at = None;
                    self.tunings.lock().expect("lock").push(0.0); // its own tuning again
                }
                let tunings = self.tunings.lock().expect("lock").len();
                out.extend([self.next as f64, tunings as f64]);
                self.next += 1;
            }
            Ok(n)
        }
        fn take_outage(&mut self) -> u64 {
            std::mem::take(&mut self.outage)
        }
        fn take_gap(&mut self) -> u64 {
            std::mem::take(&mut self.gap)
        }
        fn retune(&mut self, hz: f64) -> Result<()> {
            self.tunings.lock().expect("lock").push(hz);
            Ok(())
        }
    }

    /// At this receiver sample count, this many samples lost.
    type Loss = (u64, u64);

    fn schedule(centres: Vec<f64>, sweeps: Option<u64>) -> SweepSchedule {
        SweepSchedule {
            plan: HopPlan {
                n: 8,
                step: 1.0,
                total_bins: 8 * centres.len(),
                bins_per_hop: 8,
                centres,
            },
            settle: 5,
            hop_samples: 16,
            sweeps,
        }
    }

    /// Runs a sweep to its end: (stream sample, receiver sample, tunings before it) per sample
    /// given, and the receiver's tunings.
    fn sweep_of(
        (outage_at, gap_at): (Option<Loss>, Option<Loss>),
        s: SweepSchedule,
    ) -> (Vec<(u64, u64, usize)>, Vec<f64>) {
        let tunings = Arc::new(Mutex::new(Vec::new()));
        let receiver = Counting {
            info: SourceInfo {
                name: "test".into(),
                rate: 1.0,
                channels: 1,
                kind: InputKind::Complex,
                live: true,
            },
            next: 0,
            tunings: tunings.clone(),
            outage_at,
            outage: 0,
            gap_at,
            gap: 0,
        };
        let mut sweep = SweepSource::new(Box::new(receiver), s);
        let mut stream_sample = 0u64;
        let mut given = Vec::new();
        loop {
            let mut out = Vec::new();
            let got = sweep.read(&mut out, 100).expect("read");
            if got == 0 {
                break;
            }
            stream_sample += sweep.take_gap() + sweep.take_outage();
            for pair in out.chunks(2) {
                given.push((stream_sample, pair[0] as u64, pair[1] as usize));
                stream_sample += 1;
            }
        }
        let tunings = tunings.lock().expect("lock").clone();
        (given, tunings)
    }

    #[test]
    fn each_hop_gives_its_samples_after_the_settle() {
        let s = schedule(vec![10.0, 20.0, 30.0], Some(2));
        let tuning = s.tuning();
        let (given, tunings) = sweep_of((None, None), s);
        assert_eq!(tunings, [10.0, 20.0, 30.0, 10.0, 20.0, 30.0]);
        assert_eq!(given.len(), 6 * 16, "16 samples per hop, 3 hops, 2 sweeps");
        for (i, &(at, sample, tunings)) in given.iter().enumerate() {
            let hop = i / 16;
            // the receiver's samples after each settle, stream time counting the settle too
            assert_eq!(sample, (hop as u64 + 1) * 5 + i as u64, "{i}");
            assert_eq!(at, sample, "stream time is the receiver's sample count");
            assert_eq!(tunings, hop + 1, "read after the hop's own retune");
            assert_eq!(
                tuning.center_at(at),
                Some([10.0, 20.0, 30.0][hop % 3]),
                "{i}"
            );
        }
    }

    #[test]
    fn an_overflow_is_stream_time_of_its_hop_and_the_next_hops_stay_in_their_slots() {
        // 2 samples lost before the read at receiver sample 33 (the second hop's 8th): that hop
        // ends early, where its slot does, and the rest keep their places
        let s = schedule(vec![10.0, 20.0, 30.0], Some(2));
        let tuning = s.tuning();
        let (given, tunings) = sweep_of((None, Some((33, 2))), s);
        assert_eq!(tunings, [10.0, 20.0, 30.0, 10.0, 20.0, 30.0]);
        for &(at, _, tunings) in &given {
            let slot = at / 21;
            assert!(at % 21 >= 5, "{at}: a hop's samples come after its settle");
            assert_eq!(tunings as u64, slot + 1, "{at}: read after its own retune");
            assert_eq!(
                tuning.center_at(at),
                Some([10.0, 20.0, 30.0][(slot % 3) as usize])
            );
        }
        let per_slot = |k: u64| given.iter().filter(|g| g.0 / 21 == k).count();
        assert_eq!((per_slot(0), per_slot(1), per_slot(2)), (16, 16 - 2, 16));
        // 5 lost there: the read's 3 samples past the hop's end are most of the next settle, so
        // that hop waits for its next turn
        let (given, tunings) = sweep_of(
            (None, Some((33, 5))),
            schedule(vec![10.0, 20.0, 30.0], Some(2)),
        );
        assert_eq!(tunings, [10.0, 20.0, 10.0, 20.0, 30.0]);
        assert_eq!(given.iter().filter(|g| g.0 / 21 == 1).count(), 16 - 5);
    }

    #[test]
    fn a_reopened_receiver_resumes_at_the_next_slot_with_its_labels_right() {
        // reopened as the receiver reaches sample 33, 7 samples into the second hop's (which
        // begin at 26), after an outage of 30 samples: stream sample 33 + 30 + the 7 samples of
        // that read = 70, so the sweep goes on at slot 4 (84) and slots 2 and 3 are lost
        let s = schedule(vec![10.0, 20.0, 30.0], Some(3));
        let tuning = s.tuning();
        let (given, tunings) = sweep_of((Some((33, 30)), None), s);
        let tuned = [10.0, 20.0, 0.0, 20.0, 30.0, 10.0, 20.0, 30.0];
        assert_eq!(tunings, tuned);
        let mut slots: Vec<u64> = given.iter().map(|g| g.0 / 21).collect();
        slots.dedup();
        assert_eq!(
            slots,
            [0, 1, 4, 5, 6, 7, 8],
            "slots 2 and 3 lost, the rest whole"
        );
        assert_eq!(
            given.iter().filter(|g| g.0 / 21 == 1).count(),
            7,
            "the cut hop's part"
        );
        for &(at, _, tunings) in &given {
            let slot = at / 21;
            assert!(at % 21 >= 5, "a hop's samples come after its settle");
            assert_eq!(
                tuning.center_at(at),
                Some([10.0, 20.0, 30.0][(slot % 3) as usize])
            );
            assert_eq!(
                tuned[tunings - 1],
                [10.0, 20.0, 30.0][(slot % 3) as usize],
                "at {at}"
            );
        }
    }
}
