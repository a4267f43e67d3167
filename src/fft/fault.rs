//! Test-only fault injection for the OpenCL engines, `FFTD_FAULT_AFTER_BATCHES`:
//!
//! - `K`: every OpenCL engine fails with a device error once it has transformed K batches;
//! - `DEVICE@K[,DEVICE@K...]`: only the engines of that device, where DEVICE is a device's label
//!   as `--stats` prints it: `opencl:P:D` (every instance of that device) or `opencl:P:D#I` (its
//!   I-th instance, 1-based, when `--device` lists the same device more than once).
//!
//! Any K may be followed by `:hang` (the engine blocks at its batch K+1 and never returns, as a
//! hung device driver would: no error, no progress), `:hang=S` (it blocks S seconds at that
//! batch, then goes on normally) or `:panic` (it panics at its batch K+1, as a bug would):
//! `opencl:0:0#1@2:hang`.
//!
//! K may also be `warm-up`: the fault strikes the engine's warm-up (before it builds its
//! programs) and no batch, so `warm-up:hang` holds a device's start-up where a run ends with
//! its programs unbuilt (tests/opencl_builder.rs). `fftd build-programs` injects no fault.
//!
//! K counts per engine (each FFT worker has its own). Unparsable values inject nothing.

use std::time::Duration;

/// What an engine does once it has transformed `after_batches` batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub after_batches: u64,
    pub effect: FaultEffect,
    /// The fault strikes the engine's warm-up instead of its batches (`before_warm_up`).
    pub at_warm_up: bool,
}

/// How an injected fault shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultEffect {
    /// Every batch from then on fails with a device error.
    Error,
    /// The next batch blocks: for ever (None), or for this long and then runs normally.
    Hang(Option<Duration>),
    /// Every batch from then on panics (a bug in the engine or the worker).
    Panic,
}

impl Fault {
    /// A device error on every batch after the first `k`.
    pub fn error_after(k: u64) -> Self {
        Fault {
            after_batches: k,
            effect: FaultEffect::Error,
            at_warm_up: false,
        }
    }

    /// Called by an engine before its warm-up: as `before_batch` at the first batch for a
    /// fault of the warm-up, else Ok.
    pub(crate) fn before_warm_up(&self) -> Result<(), String> {
        match self.at_warm_up {
            true => self.strike(self.after_batches),
            false => Ok(()),
        }
    }

    /// Called by an engine before a batch, with the number of batches it has transformed: Ok to
    /// go on (after sleeping out a timed hang), Err with the reason to fail the batch. A hang
    /// for ever never returns. A fault of the warm-up strikes no batch.
    pub(crate) fn before_batch(&self, done: u64) -> Result<(), String> {
        match self.at_warm_up {
            true => Ok(()),
            false => self.strike(done),
        }
    }

    /// The fault's effect where `done` batches are done.
    fn strike(&self, done: u64) -> Result<(), String> {
        let k = self.after_batches;
        match self.effect {
            FaultEffect::Error if done >= k => Err(format!(
                "injected fault after {k} batches (FFTD_FAULT_AFTER_BATCHES)"
            )),
            FaultEffect::Hang(None) if done >= k => hang_for_ever(),
            FaultEffect::Panic if done >= k => {
                panic!("injected panic after {k} batches (FFTD_FAULT_AFTER_BATCHES)")
            }
            FaultEffect::Hang(Some(pause)) if done == k => {
                std::thread::sleep(pause);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// `K`, `K:hang`, `K:hang=SECONDS` or `K:panic`, K a number or `warm-up`.
    fn parse(text: &str) -> Option<Self> {
        let (k, effect) = match text.split_once(':') {
            None => (text, FaultEffect::Error),
            Some((k, "hang")) => (k, FaultEffect::Hang(None)),
            Some((k, "panic")) => (k, FaultEffect::Panic),
            Some((k, hang)) => {
                let seconds = hang.strip_prefix("hang=")?.trim().parse::<f64>().ok()?;
                let pause = Duration::try_from_secs_f64(seconds).ok()?;
                (k, FaultEffect::Hang(Some(pause)))
            }
        };
        let at_warm_up = k.trim() == "warm-up";
        let after_batches = match at_warm_up {
            true => 0,
            false => k.trim().parse::<u64>().ok()?,
        };
        Some(Fault {
            after_batches,
            effect,
            at_warm_up,
        })
    }
}

/// Blocks the calling thread for good, as a device call that never returns does.
fn hang_for_ever() -> ! {
    loop {
        std::thread::park(); // wakes up spuriously at most; parks again
    }
}

/// The parsed switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FaultPlan {
    every: Option<Fault>,
    /// (address `opencl:P:D`, instance or None for all, fault).
    targeted: Vec<(String, Option<usize>, Fault)>,
}

impl FaultPlan {
    /// From `FFTD_FAULT_AFTER_BATCHES` (empty when unset or unparsable).
    pub(crate) fn from_env() -> Self {
        crate::knobs::fault_after_batches()
            .and_then(|v| Self::parse(&v))
            .unwrap_or_default()
    }

    /// `K[:hang[=S]|:panic]` or `DEVICE@K[:hang[=S]|:panic][,...]`; None when the text is neither.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if let Some(fault) = Fault::parse(text) {
            return Some(FaultPlan {
                every: Some(fault),
                targeted: Vec::new(),
            });
        }
        let mut targeted = Vec::new();
        for rule in text.split(',') {
            let (device, fault) = rule.trim().split_once('@')?;
            let fault = Fault::parse(fault.trim())?;
            let (address, instance) = match device.split_once('#') {
                Some((a, i)) => (a, Some(i.parse::<usize>().ok()?)),
                None => (device, None),
            };
            targeted.push((address.trim().to_string(), instance, fault));
        }
        Some(FaultPlan {
            every: None,
            targeted,
        })
    }

    /// Whether a fault strikes batches (not only warm-ups): a run with one opens its devices
    /// before it starts, so no bridging CPU lane takes the batches the faults count.
    pub(crate) fn strikes_batches(&self) -> bool {
        let targeted = self.targeted.iter().map(|(_, _, fault)| fault);
        self.every
            .iter()
            .chain(targeted)
            .any(|fault| !fault.at_warm_up)
    }

    /// The fault of every engine (`K` alone), if any.
    pub(crate) fn every(&self) -> Option<Fault> {
        self.every
    }

    /// The fault of the engines of device `address`'s instance `instance` (1-based), if any
    /// rule names them.
    pub(crate) fn for_device(&self, address: &str, instance: usize) -> Option<Fault> {
        let targeted = self
            .targeted
            .iter()
            .find(|(a, i, _)| a == address && i.is_none_or(|i| i == instance));
        targeted.map(|(_, _, fault)| *fault).or(self.every)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(k: u64) -> Option<u64> {
        Some(k)
    }

    fn k_of(fault: Option<Fault>) -> Option<u64> {
        fault.map(|f| f.after_batches)
    }

    #[test]
    fn rules_name_every_engine_a_device_or_one_instance() {
        let every = FaultPlan::parse("3").expect("K");
        assert_eq!(k_of(every.for_device("opencl:0:0", 2)), after(3));
        assert_eq!(k_of(every.every()), after(3));
        let one = FaultPlan::parse("opencl:0:0#2@5").expect("one instance");
        assert_eq!(k_of(one.for_device("opencl:0:0", 2)), after(5));
        assert_eq!(one.for_device("opencl:0:0", 1), None);
        let device = FaultPlan::parse("opencl:0:0@1, opencl:1:0#1@7").expect("two rules");
        assert_eq!(k_of(device.for_device("opencl:0:0", 1)), after(1));
        assert_eq!(k_of(device.for_device("opencl:0:0", 2)), after(1));
        assert_eq!(k_of(device.for_device("opencl:1:0", 1)), after(7));
        assert_eq!(device.for_device("opencl:1:1", 1), None);
        assert_eq!(FaultPlan::parse("opencl:0:0"), None);
        let error = Fault::error_after(1);
        assert_eq!(
            FaultPlan::parse("x@1"),
            Some(FaultPlan {
                every: None,
                targeted: vec![("x".into(), None, error)]
            })
        );
    }

    #[test]
    fn a_fault_of_the_warm_up_strikes_it_and_no_batch() {
        let plan = FaultPlan::parse("warm-up:hang=0.01").expect("warm-up:hang=S");
        let held = plan.every().expect("every engine");
        assert!(held.at_warm_up);
        assert!(held.before_batch(0).is_ok() && held.before_batch(9).is_ok());
        let took = std::time::Instant::now();
        assert!(held.before_warm_up().is_ok());
        assert!(took.elapsed() >= Duration::from_millis(10), "held");
        let failing = FaultPlan::parse("opencl:0:0@warm-up").expect("DEVICE@warm-up");
        let failing = failing.for_device("opencl:0:0", 1).expect("its engines");
        assert!(failing.before_warm_up().is_err());
        assert!(failing.before_batch(0).is_ok());
        assert!(
            Fault::error_after(0).before_warm_up().is_ok(),
            "a batch's fault"
        );
        assert_eq!(FaultPlan::parse("warmup:hang"), None);
        let warm_up_only = FaultPlan::parse("opencl:0:0@warm-up:hang, opencl:1:0@warm-up");
        assert!(!warm_up_only.expect("two rules").strikes_batches());
        assert!(FaultPlan::parse("opencl:0:0@warm-up, opencl:1:0@3")
            .is_some_and(|p| p.strikes_batches()));
        assert!(!FaultPlan::default().strikes_batches());
    }

    #[test]
    fn a_rule_may_hang_for_ever_or_for_a_while() {
        let plan = FaultPlan::parse("opencl:0:0#1@2:hang, opencl:0:0#2@4:hang=0.5").expect("hangs");
        let first = plan.for_device("opencl:0:0", 1).expect("#1");
        assert_eq!(first.after_batches, 2);
        assert_eq!(first.effect, FaultEffect::Hang(None));
        let second = plan.for_device("opencl:0:0", 2).expect("#2");
        assert_eq!(
            second.effect,
            FaultEffect::Hang(Some(Duration::from_millis(500)))
        );
        let every = FaultPlan::parse("0:hang").expect("K:hang");
        assert_eq!(k_of(every.every()), after(0));
        let panic = FaultPlan::parse("opencl:0:0#2@3:panic").expect("panic");
        let second = panic.for_device("opencl:0:0", 2).expect("#2");
        assert_eq!(
            (second.after_batches, second.effect),
            (3, FaultEffect::Panic)
        );
        for bad in ["3:stall", "3:hang=", "3:hang=-1", "opencl:0:0@x:hang"] {
            assert_eq!(FaultPlan::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_timed_hang_pauses_its_batch_once_and_an_error_stays() {
        const PAUSE: Duration = Duration::from_millis(500);
        let pause = Fault {
            after_batches: 1,
            effect: FaultEffect::Hang(Some(PAUSE)),
            at_warm_up: false,
        };
        assert!(pause.before_batch(0).is_ok());
        let started = std::time::Instant::now();
        assert!(pause.before_batch(1).is_ok());
        assert!(started.elapsed() >= PAUSE);
        // not paused again: a pause long enough that no busy machine's scheduling delays a
        // call that does not sleep as long
        let started = std::time::Instant::now();
        assert!(pause.before_batch(2).is_ok());
        assert!(started.elapsed() < PAUSE);
        let error = Fault::error_after(1);
        assert!(error.before_batch(0).is_ok());
        assert!(error.before_batch(1).is_err() && error.before_batch(5).is_err());
    }
}
