//! Which of this host's NVIDIA GPUs the driver shows a run. NVIDIA's OpenCL driver brings up
//! every GPU it shows while its platform loads, before any context exists: on a host of two
//! H200s the platform took 0.35–0.47 s with both shown and 0.21–0.33 s with one, and
//! `fftd devices` 557–586 ms against 302–363 ms (session 30, docs/perf.md). A `--device gpu`
//! run uses one GPU, and `auto` and `gpu:all` one unless their first bounds the run (the others
//! wait in reserve, `route::later_devices_in_reserve`, `route::another_device_pays`). So where a
//! run here with the driver's whole view found the GPU they take first to be the first of
//! several alike NVIDIA GPUs (`remember`), later `gpu` runs, and `auto` and `gpu:all` runs until
//! one finds its first GPU bounding the run (`note_second_device_wanted`), show the driver that
//! one alone (`narrow_gpu_view`: `CUDA_VISIBLE_DEVICES=0`, or the first entry of the user's own
//! list): the same device under the same `opencl:P:D` name, the others not brought up. Before
//! any run here has recorded a view, NVIDIA's kernel driver's list of GPUs decides (several of
//! one model: `driver_lists_several_alike`), so a host's first run is narrowed too. Lists, named
//! devices and hosts without NVIDIA's driver are left as they are.

use super::kinds;
use crate::fft::calibrate;
use crate::fft::device_choice::DeviceChoice;
use crate::fft::opencl::device::{self, DeviceInfo};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// The variable NVIDIA's driver reads for the GPUs it shows (by CUDA's numbering, which its
/// OpenCL platform lists in the same order).
const VISIBLE: &str = "CUDA_VISIBLE_DEVICES";

/// What a run with the driver's whole view found on the NVIDIA platform, and whether a run
/// with GPUs in reserve found its first GPU bound the run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NvidiaGpus {
    /// The platform's devices.
    pub shown: usize,
    /// All of them the same model (name, compute units, memory): any one is the GPU `gpu` means.
    pub alike: bool,
    /// `--device gpu` chose the platform's first device.
    pub gpu_is_first: bool,
    /// That device's name (a later narrowed run that finds another forgets the finding).
    pub name: String,
    /// A narrowed run of a choice with GPUs in reserve found its first GPU bounding the run:
    /// such runs show the driver every GPU again, so a second can start.
    #[serde(default)]
    pub second_wanted: bool,
}

/// Set once this process showed the driver one GPU (`narrow_gpu_view`), and whether its
/// choice keeps GPUs in reserve.
static NARROWED: AtomicBool = AtomicBool::new(false);
static NARROWED_RESERVE: AtomicBool = AtomicBool::new(false);

fn path() -> Option<PathBuf> {
    calibrate::cache_dir().map(|d| d.join("gpu-view.json"))
}

/// Per driver environment (`kinds::environment`), what a run found.
fn book() -> BTreeMap<String, NvidiaGpus> {
    calibrate::load_cached(path())
}

/// Whether a run of `choice` shows the driver only its first GPU: `gpu`, and `auto` and
/// `gpu:all` unless a run found a second GPU wanted, where a run in the same environment found
/// several alike NVIDIA GPUs of which `gpu` (and so `auto` and `gpu:all` first) takes the first,
/// or, before any run has looked (`found` holds no view), where the kernel driver lists several
/// GPUs of one model (`listed_alike`, asked only then: a first run is narrowed too).
fn narrows(
    choice: &DeviceChoice,
    found: Option<&NvidiaGpus>,
    listed_alike: impl FnOnce() -> bool,
) -> bool {
    let several_alike = match found.filter(|f| f.shown > 0) {
        Some(f) => f.shown > 1 && f.alike && f.gpu_is_first,
        None => listed_alike(),
    };
    let second_wanted = found.is_some_and(|f| f.second_wanted);
    match choice {
        _ if !several_alike => false,
        DeviceChoice::Gpu => true,
        other => super::later_devices_in_reserve(other) && !second_wanted,
    }
}

/// Where NVIDIA's kernel driver lists its GPUs, a folder each with an `information` file,
/// readable without loading the OpenCL driver.
const DRIVER_GPUS: &str = "/proc/driver/nvidia/gpus";

/// Whether NVIDIA's kernel driver lists several GPUs here, all of one model (`DRIVER_GPUS`).
/// Alike GPUs are listed by CUDA, and so by its OpenCL platform, fastest first and then by bus,
/// so `gpu` takes the first of them: whichever it is, it is the model `gpu` means.
fn driver_lists_several_alike() -> bool {
    let Ok(entries) = std::fs::read_dir(DRIVER_GPUS) else {
        return false;
    };
    let information = entries.flatten().map(|e| e.path().join("information"));
    let texts = information.filter_map(|path| std::fs::read_to_string(path).ok());
    let models: Vec<String> = texts
        .filter_map(|t| model_of(&t).map(str::to_string))
        .collect();
    models.len() > 1 && models.iter().all(|m| *m == models[0])
}

/// The `Model:` line of a GPU's `information` file.
fn model_of(information: &str) -> Option<&str> {
    let model = information.lines().find_map(|l| l.strip_prefix("Model:"));
    model.map(str::trim).filter(|m| !m.is_empty())
}

/// The value that shows the driver the first GPU it shows now (`users`: the user's
/// `CUDA_VISIBLE_DEVICES`, a list of numbers or UUIDs): CUDA's first, or the list's first
/// entry. None where the list is empty.
fn first_shown(users: Option<&str>) -> Option<String> {
    let Some(list) = users else {
        return Some("0".into());
    };
    let first = list.split(',').next().map(str::trim);
    first.filter(|f| !f.is_empty()).map(str::to_string)
}

/// Shows NVIDIA's driver only the GPU a run of `choice` uses, where `narrows` says so. To be
/// called by the program's main thread before it starts any other thread and before OpenCL
/// loads: the environment is changed, which another thread reading it meanwhile could see half
/// written.
pub fn narrow_gpu_view(choice: &DeviceChoice) {
    let environment = kinds::environment(); // (read here first: see there)
    if !narrows(choice, book().get(&environment), driver_lists_several_alike) {
        return;
    }
    let users = std::env::var(VISIBLE).ok();
    let Some(first) = first_shown(users.as_deref()) else {
        return;
    };
    // (no other thread runs yet: see above)
    std::env::set_var(VISIBLE, &first);
    NARROWED.store(true, Ordering::Relaxed);
    NARROWED_RESERVE.store(super::later_devices_in_reserve(choice), Ordering::Relaxed);
    tracing::debug!(
        "{VISIBLE}={first}: the driver shows the GPU `--device {choice}` uses first alone"
    );
}

/// Whether this process set `CUDA_VISIBLE_DEVICES` itself (`narrow_gpu_view`).
pub(crate) fn narrowed() -> bool {
    NARROWED.load(Ordering::Relaxed)
}

/// After a `gpu`, `auto` or `gpu:all` run listed its devices: records what the driver's whole
/// view holds (keeping a second GPU found wanted), or, in a narrowed run that found another GPU
/// than the one recorded, forgets the finding (the next run looks again). Best effort, as every
/// cache file.
pub(crate) fn remember(choice: &DeviceChoice) {
    if *choice != DeviceChoice::Gpu && !super::later_devices_in_reserve(choice) {
        return;
    }
    let Ok(best) = device::best_device() else {
        return;
    };
    let infos: Vec<&DeviceInfo> = device::all_devices().iter().map(|d| &d.info).collect();
    let mut all = book();
    let environment = kinds::environment();
    let changed = match narrowed() {
        true => {
            let other =
                (all.get(&environment)).is_some_and(|f| f.shown > 0 && f.name != best.info.name);
            other && all.remove(&environment).is_some()
        }
        false => match nvidia_gpus(&infos, &best.info) {
            Some(mut found) => {
                found.second_wanted = all.get(&environment).is_some_and(|f| f.second_wanted);
                all.insert(environment.clone(), found.clone()) != Some(found)
            }
            None => all.remove(&environment).is_some(),
        },
    };
    tracing::debug!(found = ?all.get(&environment), changed, "the NVIDIA GPUs `gpu` sees");
    if changed {
        calibrate::save_cached(path(), &all);
    }
}

/// Called while a run's first GPU works, each time a second one would have paid
/// (`route::another_device_pays`): a narrowed run of a choice with GPUs in reserve records it
/// once, so later such runs show the driver every GPU again.
pub(crate) fn note_second_device_wanted() {
    static NOTED: AtomicBool = AtomicBool::new(false);
    if !NARROWED_RESERVE.load(Ordering::Relaxed) || NOTED.swap(true, Ordering::Relaxed) {
        return;
    }
    let mut all = book();
    // (a first run narrowed by the kernel driver's list has no view recorded yet)
    all.entry(kinds::environment()).or_default().second_wanted = true;
    tracing::debug!("the first GPU bounds the run: later runs show the driver every GPU");
    calibrate::save_cached(path(), &all);
}

/// The NVIDIA platform's devices as `gpu` (choosing `best`) finds them, from the whole view;
/// None where `best` is not on NVIDIA's own platform.
fn nvidia_gpus(infos: &[&DeviceInfo], best: &DeviceInfo) -> Option<NvidiaGpus> {
    if !best.platform_name.contains("NVIDIA") {
        return None;
    }
    let platform: Vec<&DeviceInfo> = (infos.iter().copied())
        .filter(|d| d.platform_index == best.platform_index)
        .collect();
    let model = |d: &DeviceInfo| (d.name.clone(), d.compute_units, d.global_mem);
    Some(NvidiaGpus {
        shown: platform.len(),
        alike: platform.iter().all(|d| model(d) == model(best)),
        gpu_is_first: best.device_index == 0,
        name: best.name.clone(),
        second_wanted: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200(device_index: usize) -> DeviceInfo {
        DeviceInfo {
            platform_index: 1,
            device_index,
            platform_name: "NVIDIA CUDA".into(),
            name: "NVIDIA H200".into(),
            vendor: "NVIDIA Corporation".into(),
            driver: "580.159.04".into(),
            version: "OpenCL 3.0 CUDA".into(),
            compute_units: 132,
            global_mem: 150_000_000_000,
            max_alloc: 0,
            local_mem: 49_152,
            max_work_group: 1024,
            fp64: true,
            is_gpu: true,
        }
    }

    fn found(shown: usize, alike: bool, gpu_is_first: bool) -> NvidiaGpus {
        let name = "NVIDIA H200".into();
        NvidiaGpus {
            shown,
            alike,
            gpu_is_first,
            name,
            second_wanted: false,
        }
    }

    fn never() -> bool {
        false
    }

    #[test]
    fn runs_on_several_alike_nvidia_gpus_show_the_driver_their_first_alone() {
        let two = found(2, true, true);
        for choice in [DeviceChoice::Gpu, DeviceChoice::Auto, DeviceChoice::AllGpus] {
            assert!(narrows(&choice, Some(&two), never), "{choice}");
        }
        let wanted = NvidiaGpus {
            second_wanted: true,
            ..two.clone()
        };
        assert!(narrows(&DeviceChoice::Gpu, Some(&wanted), never));
        for reserve in [DeviceChoice::Auto, DeviceChoice::AllGpus] {
            assert!(
                !narrows(&reserve, Some(&wanted), never),
                "{reserve}: a second GPU paid"
            );
        }
        assert!(
            !narrows(&DeviceChoice::Gpu, None, never),
            "nothing found yet"
        );
        assert!(!narrows(&DeviceChoice::Cpu, Some(&two), never));
        let named = DeviceChoice::OpenCl {
            platform: 1,
            device: 0,
        };
        assert!(!narrows(&named, Some(&two), never));
        let list = DeviceChoice::List(vec![DeviceChoice::Gpu, DeviceChoice::Cpu]);
        assert!(!narrows(&list, Some(&two), never));
        assert!(!narrows(
            &DeviceChoice::Gpu,
            Some(&found(1, true, true)),
            never
        ));
        assert!(!narrows(
            &DeviceChoice::Gpu,
            Some(&found(2, false, true)),
            never
        ));
        assert!(!narrows(
            &DeviceChoice::Gpu,
            Some(&found(2, true, false)),
            never
        ));
    }

    #[test]
    fn before_any_view_is_recorded_the_kernel_drivers_list_decides() {
        let listed = || true;
        assert!(narrows(&DeviceChoice::Gpu, None, listed));
        assert!(narrows(&DeviceChoice::AllGpus, None, listed));
        let wanted_only = NvidiaGpus {
            second_wanted: true,
            ..Default::default()
        };
        assert!(narrows(&DeviceChoice::Gpu, Some(&wanted_only), listed));
        assert!(!narrows(&DeviceChoice::Auto, Some(&wanted_only), listed));
        let recorded_apart = found(2, false, true);
        assert!(
            !narrows(&DeviceChoice::Gpu, Some(&recorded_apart), listed),
            "a view wins"
        );
        let h200 = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 35\nBus Location: \t 0000:18:00.0\n";
        assert_eq!(model_of(h200), Some("NVIDIA H200"));
        assert_eq!(model_of("IRQ: 35\n"), None);
    }

    #[test]
    fn the_gpu_shown_is_the_first_the_driver_or_the_users_list_shows() {
        assert_eq!(first_shown(None).as_deref(), Some("0"));
        assert_eq!(first_shown(Some("2,3")).as_deref(), Some("2"));
        assert_eq!(
            first_shown(Some(" GPU-8a1f, GPU-77c2")).as_deref(),
            Some("GPU-8a1f")
        );
        assert_eq!(first_shown(Some("1")).as_deref(), Some("1"));
        assert_eq!(first_shown(Some("")), None, "no GPU shown");
    }

    #[test]
    fn gpu_takes_the_most_compute_units_then_the_first_listed() {
        let ranked = |d: &DeviceInfo| device::gpu_preference(d);
        let (first, second) = (h200(0), h200(1));
        assert!(
            ranked(&first) > ranked(&second),
            "alike: the first, CUDA's default"
        );
        let mut bigger = h200(1);
        bigger.compute_units = 144;
        assert!(ranked(&bigger) > ranked(&first));
        let mut earlier_platform = h200(1);
        earlier_platform.platform_index = 0;
        assert!(ranked(&earlier_platform) > ranked(&first));
    }

    #[test]
    fn the_nvidia_platform_is_read_from_the_whole_view() {
        let (first, second) = (h200(0), h200(1));
        let mut pocl = h200(0);
        (pocl.platform_index, pocl.platform_name) = (0, "Portable Computing Language".into());
        let infos = [&pocl, &first, &second];
        assert_eq!(nvidia_gpus(&infos, &first), Some(found(2, true, true)));
        assert_eq!(nvidia_gpus(&infos, &second), Some(found(2, true, false)));
        assert_eq!(nvidia_gpus(&infos, &pocl), None, "not NVIDIA's platform");
        let mut smaller = h200(1);
        smaller.compute_units = 114;
        assert_eq!(
            nvidia_gpus(&[&pocl, &first, &smaller], &first),
            Some(found(2, false, true))
        );
    }
}
