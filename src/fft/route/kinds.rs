//! What the devices of this machine turned out to be, remembered in the cache folder
//! so a run can decide before it opens OpenCL: per `--device` choice, whether it named GPU-type
//! devices alone (`device-kinds.json`; such a device starts in the background while the CPU
//! engines work, `super::plan`), and per host and driver environment whether
//! `auto` found any GPU-type device, and when (`auto-gpus.json`; where it found none, file jobs
//! start no OpenCL for a day).

use crate::fft::calibrate;
use crate::fft::device_choice::DeviceChoice;
use crate::fft::device_set::{self, LaneDevice};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How long `auto` believes it found no GPU: past that it looks again (a driver installed).
const NO_GPU_FOR: Duration = Duration::from_secs(24 * 3600);

fn path() -> Option<PathBuf> {
    calibrate::cache_dir().map(|d| d.join("device-kinds.json"))
}

fn auto_path() -> Option<PathBuf> {
    calibrate::cache_dir().map(|d| d.join("auto-gpus.json"))
}

fn kinds() -> BTreeMap<String, bool> {
    calibrate::load_cached(path())
}

/// Whether `choice` named GPU-type devices alone when it was last opened.
pub(crate) fn names_gpus_alone(choice: &DeviceChoice) -> bool {
    kinds().get(&choice.to_string()) == Some(&true)
}

/// Records whether `choice` (just opened) names GPU-type devices alone; a GPU found so also
/// tells `auto` there is one.
pub(crate) fn remember(choice: &DeviceChoice) {
    let Ok(specs) = device_set::resolve(choice) else {
        return;
    };
    let all_gpus = specs
        .iter()
        .all(|s| matches!(s.device, LaneDevice::OpenCl(e) if e.info.is_gpu));
    save(choice.to_string(), all_gpus);
    if all_gpus {
        remember_auto(true);
    }
}

/// `auto`'s findings: per environment (`environment`), whether it found a GPU-type device and
/// when (seconds since the Unix epoch).
type Findings = BTreeMap<String, (bool, u64)>;

fn findings() -> Findings {
    calibrate::load_cached(auto_path())
}

/// What decides which OpenCL devices this process sees: the host, and the variables that
/// steer the ICD loader and the GPU drivers (a cache folder shared over NFS, a container
/// without the GPU, `CUDA_VISIBLE_DEVICES=` each see other devices).
fn environment() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let vars = [
        "OCL_ICD_VENDORS",
        "OCL_ICD_FILENAMES",
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
    ];
    let set: Vec<String> = (vars.iter())
        .filter_map(|v| std::env::var(v).ok().map(|value| format!("{v}={value}")))
        .collect();
    format!("{} {}", host.trim(), set.join(" "))
}

fn now_s() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_secs())
}

/// Records whether `auto` found a GPU-type device here (in this environment), and when. Best
/// effort: a cache that cannot be written only means `auto` keeps looking.
pub(crate) fn remember_auto(found: bool) {
    let mut all = findings();
    all.insert(environment(), (found, now_s()));
    calibrate::save_cached(auto_path(), &all);
}

/// Whether `auto` may bring up OpenCL for a file job: not when, in this environment, it found
/// no GPU-type device within `NO_GPU_FOR` (the OpenCL platform's start-up costs a core some
/// tenths of a second, on a machine with only PoCL too). Deleting `auto-gpus.json` in the cache
/// folder makes it look again, as does a `--device gpu` run that records a GPU (`remember`).
pub(crate) fn auto_may_find_gpus() -> bool {
    let Some(&(false, at)) = findings().get(&environment()) else {
        return true;
    };
    let age = now_s().saturating_sub(at);
    if age < NO_GPU_FOR.as_secs() {
        tracing::debug!(
            age_s = age,
            "auto: no GPU-type device was found here lately; OpenCL is not started (auto-gpus.json in the cache folder)"
        );
        return false;
    }
    true
}

/// Records a kind when it changed. Best effort: a cache that cannot be written only means the
/// device keeps being opened first.
fn save(key: String, all_gpus: bool) {
    let mut kinds = kinds();
    if kinds.insert(key, all_gpus) != Some(all_gpus) {
        calibrate::save_cached(path(), &kinds);
    }
}
