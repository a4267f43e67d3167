//! What an f64 run's batches carry as f32 (issue 41, `fft::carry`), decided in one place
//! (`decide`) from the run's plain facts and the lane a batch is for: on a device's lane, the
//! samples go up as f32 (when they are f32 values: the producer narrows them exactly or keeps
//! the run's type, `carry::narrow_exact`) and the rows come down as f32 when the output writes
//! f32 values and nothing between the device and the encoders reads them; the CPU engines'
//! lane computes in the run's type from the host's memory, so nothing is carried for it.

use super::{Dispatcher, LaneId};

/// The facts of a run the choice depends on (`Stages::assemble` gathers them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunFacts {
    /// `--precision f64`.
    pub f64: bool,
    /// `--dc-remove`: each frame loses its mean in the run's type (no longer f32 values).
    pub dc_remove: bool,
    /// The output's bytes of a row are its values `as f32` (`Encoder::writes_f32`).
    pub writes_f32: bool,
    /// Something reads the rows' values after the device (products, averaging, the live view,
    /// alerts, `--fftshift`): they must stay in the run's type.
    pub rows_read: bool,
}

/// What one batch carries as f32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Carriage {
    /// Its samples go up as f32 (those that are f32 values).
    pub samples_f32: bool,
    /// Its rows come down as f32.
    pub rows_f32: bool,
}

/// The decision: what a batch of a run with `run`'s facts carries on a device's lane
/// (`device`) or on the CPU engines' lane.
pub(crate) fn decide(run: &RunFacts, device: bool) -> Carriage {
    let f64_on_device = run.f64 && device;
    Carriage {
        samples_f32: f64_on_device && !run.dc_remove,
        rows_f32: f64_on_device && run.writes_f32 && !run.rows_read,
    }
}

impl<T> Dispatcher<T> {
    /// The run's facts for `carriage` (set once, before any producer starts).
    pub(crate) fn set_run_facts(&mut self, facts: RunFacts) {
        self.facts = facts;
    }

    /// What a batch for lane `lane` carries (`decide`).
    pub(crate) fn carriage(&self, lane: LaneId) -> Carriage {
        let state = self.lock();
        let device = state.lanes.get(lane).is_some_and(|slot| !slot.lane.is_cpu);
        decide(&self.facts, device)
    }

    /// What a batch on a device's lane carries (a device's warm-up, before its lane joins).
    pub(crate) fn device_carriage(&self) -> Carriage {
        decide(&self.facts, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(f64: bool, dc_remove: bool, writes_f32: bool, rows_read: bool) -> RunFacts {
        RunFacts {
            f64,
            dc_remove,
            writes_f32,
            rows_read,
        }
    }

    #[test]
    fn an_f64_run_on_a_device_carries_f32_both_ways_when_its_output_writes_f32() {
        let both = Carriage {
            samples_f32: true,
            rows_f32: true,
        };
        assert_eq!(decide(&facts(true, false, true, false), true), both);
    }

    #[test]
    fn the_cpu_lane_and_f32_runs_carry_nothing() {
        for run in [
            facts(true, false, true, false),
            facts(false, false, true, false),
        ] {
            assert_eq!(
                decide(&run, false),
                Carriage::default(),
                "{run:?} on the CPU"
            );
        }
        assert_eq!(
            decide(&facts(false, false, true, false), true),
            Carriage::default()
        );
    }

    #[test]
    fn samples_stay_wide_with_dc_remove_and_rows_when_read_or_written_wide() {
        let samples_only = Carriage {
            samples_f32: true,
            rows_f32: false,
        };
        // csv, npy in f64 …: the output writes f64 values or text
        assert_eq!(
            decide(&facts(true, false, false, false), true),
            samples_only
        );
        // products, --average, --serve, --alert, --fftshift read the rows
        assert_eq!(decide(&facts(true, false, true, true), true), samples_only);
        let rows_only = Carriage {
            samples_f32: false,
            rows_f32: true,
        };
        assert_eq!(decide(&facts(true, true, true, false), true), rows_only);
    }

    #[test]
    fn the_dispatcher_answers_for_each_lane() {
        use crate::fft::lanes::{Lane, LaneSet};
        use crate::fft::route::LaneSpeed;
        let (mut d, _) = Dispatcher::<f64>::new(LaneSet::new(true));
        d.set_run_facts(facts(true, false, true, false));
        let cpu = Lane::new("cpu".into(), "CPU engine".into(), true, 1);
        let gpu = Lane::new("opencl:0:0".into(), "dev".into(), false, 1);
        let (cpu_id, _cpu_rx) = d.add_lane(cpu, LaneSpeed::Even, 1, |_| {}).expect("open");
        let (gpu_id, _gpu_rx) = d.add_lane(gpu, LaneSpeed::Even, 1, |_| {}).expect("open");
        assert_eq!(d.carriage(cpu_id), Carriage::default());
        assert_eq!(d.carriage(gpu_id), d.device_carriage());
        assert!(d.carriage(gpu_id).samples_f32 && d.carriage(gpu_id).rows_f32);
    }
}
