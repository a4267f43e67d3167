//! `--sweep LOW:HIGH:BIN` (issue 42): a source that surveys a band wider than the receiver by
//! retuning it hop after hop, as rtl_power does. It takes a tunable receiver (`Retune`: rtl_tcp
//! today) and gives the samples of each hop, each after its retune had effect.
//!
//! Per hop: retune to the hop's centre (`plan::HopPlan`), read and leave out `settle` samples
//! (receivers acknowledge nothing: the samples already in the dongle's transfers and the server's
//! queue were taken at the old frequency), then give exactly `hop_samples` = (frames − 1) · hop +
//! n samples, which the reader cuts into the hop's `frames` frames; the settle samples are stream
//! time without samples, so framing restarts after them (`take_outage`) and no frame straddles
//! two hops. The schedule is fixed in samples, so where each hop lies in the stream, and so the
//! centre that labels each row (`tuning`: one sweep's captures, repeating), follow from the plan
//! alone. After `sweeps` full sweeps the input ends; without, it runs until stopped.

pub(crate) mod plan;

use super::{SampleSource, SourceInfo};
use crate::error::Result;
use crate::types::tuning::{Capture, Tuning};
use plan::HopPlan;
use std::sync::Arc;

/// A receiver whose frequency can be changed while it streams.
pub(crate) trait Retune: SampleSource {
    /// Asks the receiver for centre frequency `hz`; samples read after it may still predate it.
    fn retune(&mut self, hz: f64) -> Result<()>;
}

/// When and for how long each hop is read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SweepSchedule {
    pub(crate) plan: HopPlan,
    /// Samples left out after each retune.
    pub(crate) settle: u64,
    /// Frames each hop gives (one row per hop: `--average` of this many frames).
    pub(crate) frames_per_hop: usize,
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
    /// captures, repeating every sweep (a single hop is tuned once, so it is one centre).
    pub(crate) fn tuning(&self) -> Arc<Tuning> {
        let captures = (self.plan.centres.iter().enumerate())
            .map(|(i, &centre)| Capture {
                sample_start: i as u64 * self.slot() + self.settle,
                frequency: Some(centre),
                datetime: None,
            })
            .collect();
        let hops = self.plan.hops() as u64;
        Arc::new(Tuning {
            captures,
            period: (hops > 1).then(|| hops * self.slot()),
        })
    }
}

/// A receiver driven through a sweep.
pub(crate) struct SweepSource<S> {
    receiver: S,
    schedule: SweepSchedule,
    /// The hop being read (None before the first).
    hop: Option<usize>,
    /// Samples of the current hop still to give.
    left: u64,
    sweeps_done: u64,
    /// Settle samples left out since the reader last asked.
    outage: u64,
    scratch: Vec<f64>,
}

impl<S: Retune> SweepSource<S> {
    pub(crate) fn new(receiver: S, schedule: SweepSchedule) -> Self {
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
            hop: None,
            left: 0,
            sweeps_done: 0,
            outage: 0,
            scratch: Vec::new(),
        }
    }

    /// Moves to the next hop: retunes and lets the receiver settle. False at the end of the
    /// sweeps or when stopped.
    fn next_hop(&mut self) -> Result<bool> {
        let hops = self.schedule.plan.hops();
        let mut next = self.hop.map_or(0, |h| h + 1);
        if next == hops {
            self.sweeps_done += 1;
            if Some(self.sweeps_done) == self.schedule.sweeps {
                return Ok(false);
            }
            next = 0;
        }
        // a band of one hop is tuned once
        if self.hop.is_none() || hops > 1 {
            self.receiver.retune(self.schedule.plan.centres[next])?;
            if !self.discard(self.schedule.settle)? {
                return Ok(false);
            }
            self.outage += self.schedule.settle;
        }
        self.hop = Some(next);
        self.left = self.schedule.hop_samples;
        Ok(true)
    }

    /// Reads and drops `count` samples; false when stopped first.
    fn discard(&mut self, mut count: u64) -> Result<bool> {
        while count > 0 {
            self.scratch.clear();
            let want = count.min(1 << 16) as usize;
            let got = self.receiver.read(&mut self.scratch, want)?;
            if got == 0 {
                return Ok(false);
            }
            count -= (got as u64).min(count);
        }
        Ok(true)
    }
}

impl<S: Retune> SampleSource for SweepSource<S> {
    fn info(&self) -> &SourceInfo {
        self.receiver.info()
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        if self.left == 0 && !self.next_hop()? {
            return Ok(0);
        }
        let want = (max_frames.max(1) as u64).min(self.left) as usize;
        let got = self.receiver.read(out, want)?;
        self.left -= (got as u64).min(self.left);
        Ok(got)
    }

    fn take_outage(&mut self) -> u64 {
        std::mem::take(&mut self.outage)
    }

    fn take_gap(&mut self) -> u64 {
        self.receiver.take_gap()
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

    /// A receiver whose sample k is k + 1000 · (its tuning count), so a test sees which samples
    /// were given and at which tuning.
    struct Counting {
        info: SourceInfo,
        next: u64,
        tunings: Vec<f64>,
    }

    impl SampleSource for Counting {
        fn info(&self) -> &SourceInfo {
            &self.info
        }
        fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
            let n = max_frames.min(7); // short reads, as a socket gives
            for _ in 0..n {
                out.extend([self.next as f64, self.tunings.len() as f64]);
                self.next += 1;
            }
            Ok(n)
        }
    }

    impl Retune for Counting {
        fn retune(&mut self, hz: f64) -> Result<()> {
            self.tunings.push(hz);
            Ok(())
        }
    }

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
            frames_per_hop: 2,
            hop_samples: 16,
            sweeps,
        }
    }

    #[test]
    fn each_hop_gives_its_samples_after_the_settle() {
        let receiver = Counting {
            info: SourceInfo {
                name: "test".into(),
                rate: 1.0,
                channels: 1,
                kind: InputKind::Complex,
                live: true,
            },
            next: 0,
            tunings: Vec::new(),
        };
        let s = schedule(vec![10.0, 20.0, 30.0], Some(2));
        let tuning = s.tuning();
        let mut sweep = SweepSource::new(receiver, s);
        let mut stream_sample = 0u64;
        let mut given = Vec::new();
        loop {
            let mut out = Vec::new();
            let got = sweep.read(&mut out, 100).expect("read");
            if got == 0 {
                break;
            }
            stream_sample += sweep.take_outage();
            for pair in out.chunks(2) {
                given.push((stream_sample, pair[0] as u64, pair[1] as usize));
                stream_sample += 1;
            }
        }
        assert_eq!(sweep.receiver.tunings, [10.0, 20.0, 30.0, 10.0, 20.0, 30.0]);
        assert_eq!(given.len(), 6 * 16, "16 samples per hop, 3 hops, 2 sweeps");
        for (i, &(at, sample, tunings)) in given.iter().enumerate() {
            let hop = i / 16;
            // the receiver's samples after each settle, stream time counting the settle too
            assert_eq!(sample, (hop as u64 + 1) * 5 + i as u64, "{i}");
            assert_eq!(at, sample, "stream time is the receiver's sample count");
            assert_eq!(tunings, hop + 1, "read after the hop's own retune");
            let centre = [10.0, 20.0, 30.0][hop % 3];
            assert_eq!(tuning.center_at(at), Some(centre), "{i}");
        }
    }
}
