//! Which devices of this machine a `--device` choice means: the CPU engine and OpenCL device
//! instances, in the order given, each with the label `--stats` and the warnings use.
//!
//! - `gpu`: the best OpenCL device (a GPU-type one when there is one); `opencl:P:D` that device;
//!   either missing is a runtime error (exit 1), as before lists existed.
//! - `gpu:all`: every GPU-type OpenCL device; on a machine with none (PoCL in CI) it falls back
//!   to the best OpenCL device, as `gpu` does, with one info line; no OpenCL is an error (exit 1).
//! - a list: its entries in order; an entry that names no device here is a usage error (exit 2)
//!   naming the entry. The same device listed twice is opened twice: two instances with their
//!   own context, queues, programs and pinned memory, labelled `opencl:P:D#1`, `opencl:P:D#2`
//!   (for tests and oversubscription; on one device they share its compute, so expect no gain).
//! - `auto`: every GPU-type device, or the best OpenCL device when there is none; nothing when
//!   there is no OpenCL (the router then uses the CPU engine).

use super::device_choice::DeviceChoice;
use super::opencl::device::{self, DeviceEntry, SharedDevice};
use super::opencl::{OpenClEngine, OpenClOptions};
use crate::error::FftdError;
use crate::types::Sample;

/// One device a run computes on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LaneDevice {
    Cpu,
    OpenCl(&'static DeviceEntry),
}

/// One device instance of a choice.
#[derive(Clone, Debug)]
pub(crate) struct LaneSpec {
    pub device: LaneDevice,
    /// 1-based: the how-many-th time the choice names this device.
    pub instance: usize,
    /// How many times the choice names this device (labels carry `#I` when more than once).
    pub listed: usize,
}

impl LaneSpec {
    /// `cpu` or `opencl:P:D`.
    pub(crate) fn address(&self) -> String {
        match self.device {
            LaneDevice::Cpu => "cpu".into(),
            LaneDevice::OpenCl(entry) => entry.info.address(),
        }
    }

    /// The address, with `#I` when the device is listed more than once.
    pub(crate) fn label(&self) -> String {
        match self.listed {
            0 | 1 => self.address(),
            _ => format!("{}#{}", self.address(), self.instance),
        }
    }

    /// The device's name ("CPU engine" for the CPU).
    pub(crate) fn name(&self) -> String {
        match self.device {
            LaneDevice::Cpu => "CPU engine".into(),
            LaneDevice::OpenCl(entry) => entry.info.name.clone(),
        }
    }
}

/// The device address in a lane label (`LaneSpec::label`'s inverse): the label less its `#I`.
pub(crate) fn address_in_label(label: &str) -> &str {
    label.split_once('#').map_or(label, |(address, _)| address)
}

/// The device instances `choice` means on this machine.
pub(crate) fn resolve(choice: &DeviceChoice) -> Result<Vec<LaneSpec>, FftdError> {
    let devices = match choice {
        DeviceChoice::Auto => auto_candidates(),
        DeviceChoice::Cpu => vec![LaneDevice::Cpu],
        DeviceChoice::Gpu => vec![LaneDevice::OpenCl(best("--device gpu")?)],
        DeviceChoice::OpenCl { platform, device } => {
            let entry = device::device_at(*platform, *device)
                .map_err(|e| FftdError::Runtime(format!("--device {choice}: {e}")))?;
            vec![LaneDevice::OpenCl(entry)]
        }
        DeviceChoice::AllGpus => all_gpus()?,
        DeviceChoice::List(entries) => list(choice, entries)?,
    };
    Ok(numbered(devices))
}

/// The OpenCL devices only, of `resolve` (for tools that compare or time OpenCL devices).
pub(crate) fn opencl_devices(choice: &DeviceChoice) -> Result<Vec<LaneSpec>, FftdError> {
    Ok(resolve(choice)?
        .into_iter()
        .filter(|s| matches!(s.device, LaneDevice::OpenCl(_)))
        .collect())
}

/// One OpenCL engine with `options` on each OpenCL device instance `choice` names (`auto` as
/// `gpu`: the best device; `cpu`: none), with the instances: the engines `fftd check` compares
/// and `fftd bench` times. An instance that cannot open is a runtime error naming its label.
pub(crate) fn open_opencl<T: Sample>(
    choice: &DeviceChoice,
    options: &OpenClOptions,
) -> Result<(Vec<LaneSpec>, Vec<OpenClEngine<T>>), FftdError> {
    let choice = match choice {
        DeviceChoice::Auto => &DeviceChoice::Gpu,
        other => other,
    };
    let specs = opencl_devices(choice)?;
    let open = |spec: &LaneSpec| {
        let at = |e: String| FftdError::Runtime(format!("{}: {e}", spec.label()));
        let LaneDevice::OpenCl(entry) = spec.device else {
            return Err(at("not an OpenCL device".into()));
        };
        let dev = SharedDevice::open_instance(entry, spec.instance).map_err(at)?;
        OpenClEngine::<T>::on_device(dev, options.clone()).map_err(at)
    };
    let engines = specs.iter().map(open).collect::<Result<Vec<_>, _>>()?;
    Ok((specs, engines))
}

fn best(what: &str) -> Result<&'static DeviceEntry, FftdError> {
    device::best_device()
        .map_err(|e| FftdError::Runtime(format!("{what}: no usable OpenCL device: {e}")))
}

/// The GPU-type devices, most compute units first (the first is the one the others wait behind
/// in reserve, `route::later_devices_in_reserve`; equal ones in enumeration order).
fn gpu_entries() -> Vec<&'static DeviceEntry> {
    let mut gpus: Vec<_> = (device::all_devices().into_iter())
        .filter(|d| d.info.is_gpu)
        .collect();
    gpus.sort_by_key(|d| std::cmp::Reverse(d.info.compute_units));
    gpus
}

fn auto_candidates() -> Vec<LaneDevice> {
    let gpus = gpu_entries();
    if !gpus.is_empty() {
        return gpus.into_iter().map(LaneDevice::OpenCl).collect();
    }
    device::best_device()
        .map(|d| vec![LaneDevice::OpenCl(d)])
        .unwrap_or_default()
}

fn all_gpus() -> Result<Vec<LaneDevice>, FftdError> {
    let gpus = gpu_entries();
    if !gpus.is_empty() {
        return Ok(gpus.into_iter().map(LaneDevice::OpenCl).collect());
    }
    let entry = best("--device gpu:all")?;
    super::log_once::info_once(
        "gpu:all without a GPU".into(),
        &format!(
            "--device gpu:all: no GPU-type OpenCL device; using {} ({}) as --device gpu would",
            entry.info.address(),
            entry.info.name
        ),
    );
    Ok(vec![LaneDevice::OpenCl(entry)])
}

/// The entries of a list; one that names no device here is a usage error naming it.
fn list(choice: &DeviceChoice, entries: &[DeviceChoice]) -> Result<Vec<LaneDevice>, FftdError> {
    let at = |i: usize, entry: &DeviceChoice, why: String| {
        FftdError::Usage(format!(
            "--device {choice}: entry {} ({entry}): {why}",
            i + 1
        ))
    };
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| match entry {
            DeviceChoice::Cpu => Ok(LaneDevice::Cpu),
            DeviceChoice::Gpu => device::best_device()
                .map(LaneDevice::OpenCl)
                .map_err(|e| at(i, entry, format!("no usable OpenCL device: {e}"))),
            DeviceChoice::OpenCl { platform, device } => device::device_at(*platform, *device)
                .map(LaneDevice::OpenCl)
                .map_err(|e| at(i, entry, e)),
            other => Err(at(i, other, "not allowed in a list".into())),
        })
        .collect()
}

/// Instance numbers for devices named more than once.
fn numbered(devices: Vec<LaneDevice>) -> Vec<LaneSpec> {
    let key = |d: &LaneDevice| match d {
        LaneDevice::Cpu => None,
        LaneDevice::OpenCl(e) => Some((e.info.platform_index, e.info.device_index)),
    };
    let keys: Vec<_> = devices.iter().map(key).collect();
    devices
        .into_iter()
        .enumerate()
        .map(|(i, device)| LaneSpec {
            device,
            instance: 1 + keys[..i].iter().filter(|k| **k == keys[i]).count(),
            listed: keys.iter().filter(|k| **k == keys[i]).count(),
        })
        .collect()
}
