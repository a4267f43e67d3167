//! Test-only fault injection for the OpenCL engines, `FFTD_FAULT_AFTER_BATCHES`:
//!
//! - `K`: every OpenCL engine fails with a device error once it has transformed K batches;
//! - `DEVICE@K[,DEVICE@K...]`: only the engines of that device, where DEVICE is a device's label
//!   as `--stats` prints it: `opencl:P:D` (every instance of that device) or `opencl:P:D#I` (its
//!   I-th instance, 1-based, when `--device` lists the same device more than once).
//!
//! K counts per engine (each FFT worker has its own). Unparsable values inject nothing.

/// The parsed switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    every: Option<u64>,
    /// (address `opencl:P:D`, instance or None for all, K).
    targeted: Vec<(String, Option<usize>, u64)>,
}

impl FaultPlan {
    /// From `FFTD_FAULT_AFTER_BATCHES` (empty when unset or unparsable).
    pub fn from_env() -> Self {
        std::env::var("FFTD_FAULT_AFTER_BATCHES")
            .ok()
            .and_then(|v| Self::parse(&v))
            .unwrap_or_default()
    }

    /// `K` or `DEVICE@K[,DEVICE@K...]`; None when the text is neither.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if let Ok(k) = text.parse::<u64>() {
            return Some(FaultPlan {
                every: Some(k),
                targeted: Vec::new(),
            });
        }
        let mut targeted = Vec::new();
        for rule in text.split(',') {
            let (device, k) = rule.trim().split_once('@')?;
            let k = k.trim().parse::<u64>().ok()?;
            let (address, instance) = match device.split_once('#') {
                Some((a, i)) => (a, Some(i.parse::<usize>().ok()?)),
                None => (device, None),
            };
            targeted.push((address.trim().to_string(), instance, k));
        }
        Some(FaultPlan {
            every: None,
            targeted,
        })
    }

    /// The batch count after which the engines of device `address`'s instance `instance`
    /// (1-based) fail, if any rule names them.
    pub fn for_device(&self, address: &str, instance: usize) -> Option<u64> {
        let targeted = self
            .targeted
            .iter()
            .find(|(a, i, _)| a == address && i.is_none_or(|i| i == instance));
        targeted.map(|(_, _, k)| *k).or(self.every)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_name_every_engine_a_device_or_one_instance() {
        let every = FaultPlan::parse("3").expect("K");
        assert_eq!(every.for_device("opencl:0:0", 2), Some(3));
        let one = FaultPlan::parse("opencl:0:0#2@5").expect("one instance");
        assert_eq!(one.for_device("opencl:0:0", 2), Some(5));
        assert_eq!(one.for_device("opencl:0:0", 1), None);
        let device = FaultPlan::parse("opencl:0:0@1, opencl:1:0#1@7").expect("two rules");
        assert_eq!(device.for_device("opencl:0:0", 1), Some(1));
        assert_eq!(device.for_device("opencl:0:0", 2), Some(1));
        assert_eq!(device.for_device("opencl:1:0", 1), Some(7));
        assert_eq!(device.for_device("opencl:1:1", 1), None);
        assert_eq!(FaultPlan::parse("opencl:0:0"), None);
        assert_eq!(
            FaultPlan::parse("x@1"),
            Some(FaultPlan {
                every: None,
                targeted: vec![("x".into(), None, 1)]
            })
        );
    }
}
