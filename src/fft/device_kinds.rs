//! What the devices of this machine turned out to be, remembered in the cache folder
//! (`device-kinds.json`), so a run can decide before it opens OpenCL: per `--device` choice,
//! whether it named GPU-type devices alone (such a device starts in the background while the
//! CPU engines work, `router::starts_in_background`), and whether `auto` found any GPU-type
//! device when it last looked (where it found none, file jobs start no OpenCL for a day).

use super::calibrate;
use super::device_choice::DeviceChoice;
use super::device_set::{self, LaneDevice};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Under this key, whether `auto` found GPU-type devices when it last looked.
const AUTO_GPUS: &str = "auto (any GPU)";

/// How long `auto` believes it found no GPU: past that it looks again (a driver installed).
const NO_GPU_FOR: Duration = Duration::from_secs(24 * 3600);

fn path() -> Option<PathBuf> {
    calibrate::cache_dir().map(|d| d.join("device-kinds.json"))
}

fn kinds() -> BTreeMap<String, bool> {
    path()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Whether `choice` named GPU-type devices alone when it was last opened.
pub fn names_gpus_alone(choice: &DeviceChoice) -> bool {
    kinds().get(&choice.to_string()) == Some(&true)
}

/// Records whether `choice` (just opened) names GPU-type devices alone.
pub fn remember(choice: &DeviceChoice) {
    let Ok(specs) = device_set::resolve(choice) else {
        return;
    };
    let all_gpus = specs
        .iter()
        .all(|s| matches!(s.device, LaneDevice::OpenCl(e) if e.info.is_gpu));
    save(choice.to_string(), all_gpus, false);
}

/// Records whether `auto` found any GPU-type device (none: dated, see `auto_may_find_gpus`).
pub fn remember_auto(found: bool) {
    save(AUTO_GPUS.into(), found, !found);
}

/// Whether `auto` may bring up OpenCL for a file job: not when it found no GPU-type device
/// the last time it looked, within `NO_GPU_FOR` (the OpenCL platform's start-up costs a core
/// some tenths of a second, on a machine with only PoCL too).
pub fn auto_may_find_gpus() -> bool {
    if kinds().get(AUTO_GPUS) != Some(&false) {
        return true;
    }
    let modified = path()
        .and_then(|p| std::fs::metadata(p).ok())
        .and_then(|m| m.modified().ok());
    let age = modified.and_then(|m| m.elapsed().ok());
    age.is_none_or(|age| age > NO_GPU_FOR)
}

/// Records a kind; saved when it changed, or always when `dated` (the file's time then says
/// when it was last found). Best effort: a cache that cannot be written only means the device
/// keeps being opened first, or `auto` keeps looking for GPUs.
fn save(key: String, all_gpus: bool, dated: bool) {
    let mut kinds = kinds();
    if kinds.insert(key, all_gpus) == Some(all_gpus) && !dated {
        return;
    }
    let (Some(path), Ok(text)) = (path(), serde_json::to_string(&kinds)) else {
        return;
    };
    if let Err(e) = calibrate::save_atomically(&path, &text) {
        tracing::debug!("cannot save {e}");
    }
}
