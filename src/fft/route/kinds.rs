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

/// Whether `choice` names GPU-type devices alone: as it did when it was last opened, or, where
/// no run here has opened it yet (a fresh machine, an empty cache folder), whether it is `gpu`
/// or `gpu:all` on a machine with a GPU's kernel driver and its OpenCL driver registered
/// (`gpu_driver_present`): such a first run starts its device in the background as later ones
/// do, instead of waiting for the platform, the context and the program builds (1.7 s against
/// 0.47 s on an H200 host, issue 41).
pub(crate) fn names_gpus_alone(choice: &DeviceChoice) -> bool {
    match kinds().get(&choice.to_string()) {
        Some(&known) => known,
        None => guess_gpus_alone(choice, gpu_driver_present),
    }
}

/// `names_gpus_alone` for a choice no run here has opened: only `gpu` and `gpu:all`, and only
/// where `driver_present()` (asked only for those).
fn guess_gpus_alone(choice: &DeviceChoice, driver_present: impl Fn() -> bool) -> bool {
    matches!(choice, DeviceChoice::Gpu | DeviceChoice::AllGpus) && driver_present()
}

/// GPU kernel drivers (a device file each makes) and the name their OpenCL driver's library
/// has in an ICD registration.
const GPU_DRIVERS: [(&str, &str); 2] = [("/dev/nvidiactl", "nvidia"), ("/dev/kfd", "amdocl")];

/// Whether a GPU's kernel driver is loaded here and its OpenCL driver registered with the ICD
/// loader (in `OCL_ICD_FILENAMES`, or a `.icd` file of `OCL_ICD_VENDORS` or
/// /etc/OpenCL/vendors), without opening OpenCL. The registrations are read only where a GPU's
/// device file exists (on a machine without a GPU, none is read).
fn gpu_driver_present() -> bool {
    let loaded: Vec<&str> = (GPU_DRIVERS.iter())
        .filter(|(device_file, _)| std::path::Path::new(device_file).exists())
        .map(|&(_, library)| library)
        .collect();
    if loaded.is_empty() {
        return false;
    }
    let dir = std::env::var("OCL_ICD_VENDORS").unwrap_or_else(|_| "/etc/OpenCL/vendors".into());
    let mut registered: Vec<String> = std::env::var("OCL_ICD_FILENAMES").into_iter().collect();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let icd_files = entries.flatten().map(|e| e.path());
        let icd_files = icd_files.filter(|p| p.extension().is_some_and(|x| x == "icd"));
        registered.extend(icd_files.filter_map(|p| std::fs::read_to_string(p).ok()));
    }
    let names = |library: &str| {
        registered
            .iter()
            .any(|r| r.to_lowercase().contains(library))
    };
    loaded.into_iter().any(names)
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
    super::gpu_view::remember(choice);
}

/// `auto`'s findings: per environment (`environment`), whether it found a GPU-type device and
/// when (seconds since the Unix epoch).
type Findings = BTreeMap<String, (bool, u64)>;

fn findings() -> Findings {
    calibrate::load_cached(auto_path())
}

/// What decides which OpenCL devices this process sees: the host, and the variables that
/// steer the ICD loader and the GPU drivers (a cache folder shared over NFS, a container
/// without the GPU, `CUDA_VISIBLE_DEVICES=` each see other devices). Read once, first by the
/// run's main thread before OpenCL loads (`gpu_view::narrow_gpu_view`): the ICD loader cuts
/// `OCL_ICD_FILENAMES` at its first `:` in place while it loads (seen on a GPU host, session
/// 30), and the `CUDA_VISIBLE_DEVICES` that counts is the user's, not one this process sets.
pub(crate) fn environment() -> String {
    static ENVIRONMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ENVIRONMENT.get_or_init(read_environment).clone()
}

fn read_environment() -> String {
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
/// effort: a cache that cannot be written only means `auto` keeps looking. A GPU already
/// recorded is not written again (only a finding of none is timed, `auto_may_find_gpus`): every
/// run that starts a GPU in the background reports it.
pub(crate) fn remember_auto(found: bool) {
    let mut all = findings();
    let environment = environment();
    if found && all.get(&environment).is_some_and(|&(was, _)| was) {
        return;
    }
    all.insert(environment, (found, now_s()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unopened_choice_is_guessed_a_gpu_only_for_gpu_kinds_with_a_driver_present() {
        let yes = || true;
        assert!(guess_gpus_alone(&DeviceChoice::Gpu, yes));
        assert!(guess_gpus_alone(&DeviceChoice::AllGpus, yes));
        assert!(!guess_gpus_alone(&DeviceChoice::Gpu, || false));
        assert!(!guess_gpus_alone(&DeviceChoice::Cpu, yes));
        assert!(!guess_gpus_alone(&DeviceChoice::Auto, yes));
        let named = DeviceChoice::OpenCl {
            platform: 0,
            device: 0,
        };
        assert!(!guess_gpus_alone(&named, yes), "an OpenCL device by number");
    }
}
