//! Which of this host's NVIDIA GPUs the driver shows a run. NVIDIA's OpenCL driver brings up
//! every GPU it shows while its platform loads, before any context exists: on a host of two
//! H200s the platform took 0.35–0.47 s with both shown and 0.21–0.33 s with one, and
//! `fftd devices` 557–586 ms against 302–363 ms (session 30, docs/perf.md). A `--device gpu`
//! run uses one GPU, and `auto` and `gpu:all` one unless their first bounds the run (the others
//! wait in reserve, `route::later_devices_in_reserve`, `route::another_device_pays`). So where a
//! run here with the driver's whole view found the GPU they take first to be the first of
//! several alike NVIDIA GPUs (`remember`), later `gpu` runs, and `auto` and `gpu:all` runs of
//! every job whose run did not find a second GPU wanted (`note_if_second_device_wanted`, kept
//! per job shape as `auto`'s records are), show the driver that one alone (`narrow_gpu_view`:
//! `CUDA_VISIBLE_DEVICES=0`, or the first entry of the user's own
//! list): the same device under the same `opencl:P:D` name, the others not brought up. Before
//! any run here has recorded a view, NVIDIA's kernel driver's list of GPUs decides (several of
//! one model: `driver_lists_several_alike`), so a host's first run is narrowed too. Lists, named
//! devices and hosts without NVIDIA's driver are left as they are.

use super::{kinds, Demand};
use crate::fft::calibrate;
use crate::fft::device_choice::DeviceChoice;
use crate::fft::opencl::device::{self, DeviceInfo};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The variable NVIDIA's driver reads for the GPUs it shows (by CUDA's numbering, which its
/// OpenCL platform lists in the same order).
const VISIBLE: &str = "CUDA_VISIBLE_DEVICES";

/// What a run with the driver's whole view found on the NVIDIA platform, and what narrowed runs
/// learned since.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct NvidiaGpus {
    /// The platform's devices (0: no view recorded, only what narrowed runs learned).
    shown: usize,
    /// All of them the same model (name, compute units, memory): any one is the GPU `gpu` means.
    alike: bool,
    /// `--device gpu` chose the platform's first device.
    gpu_is_first: bool,
    /// That device's name (a narrowed run that finds another model forgets the view).
    name: String,
    /// The job shapes (`route::record::JobKey`) whose narrowed run of `auto` or `gpu:all`
    /// found its first GPU bounding the run: their runs show the driver every GPU again, so a
    /// second can start; other jobs' runs stay narrowed. The latest last, at most `WANTED_JOBS`.
    #[serde(default)]
    second_wanted_by: Vec<String>,
    /// A narrowed run found no device of NVIDIA's platform (the GPU shown cannot serve OpenCL:
    /// MIG, a compute mode): no run here is narrowed again.
    #[serde(default)]
    refused: bool,
}

/// Set once this process showed the driver one GPU (`narrow_gpu_view`), and whether its
/// choice keeps GPUs in reserve.
static NARROWED: AtomicBool = AtomicBool::new(false);
static NARROWED_RESERVE: AtomicBool = AtomicBool::new(false);
/// This run's job shape, for the notes of a second GPU wanted or not (`narrow_gpu_view`).
static JOB: OnceLock<String> = OnceLock::new();

/// Job shapes a record keeps as wanting a second GPU (the oldest forgotten first).
const WANTED_JOBS: usize = 64;

fn path() -> Option<PathBuf> {
    calibrate::cache_dir().map(|d| d.join("gpu-view.json"))
}

/// Per driver environment (`kinds::environment`), what runs found.
fn book() -> BTreeMap<String, NvidiaGpus> {
    calibrate::load_cached(path())
}

/// The choices whose runs use one GPU first: `gpu`, and `auto` and `gpu:all` (their others
/// wait in reserve). Only their runs are narrowed, and only they record what they found.
fn uses_one_gpu_first(choice: &DeviceChoice) -> bool {
    matches!(
        choice,
        DeviceChoice::Gpu | DeviceChoice::Auto | DeviceChoice::AllGpus
    )
}

/// Whether a run of `choice` (on live input or not) shows the driver only its first GPU: `gpu`;
/// `auto`, and `gpu:all` on a file (live input opens every device before the run, so none would
/// ever be found wanted), unless a run of `job` found a second GPU wanted; never once a narrowed run found no NVIDIA
/// device. And only where the GPUs are several of one model, `gpu` taking the first: as a run
/// with the driver's whole view found them (`found`) and as the kernel driver lists them
/// (`listed`: None where it lists none to read); either alone where there is no other.
fn narrows(
    (choice, live, job): (&DeviceChoice, bool, &str),
    found: impl FnOnce() -> Option<NvidiaGpus>,
    listed: impl FnOnce() -> Option<bool>,
) -> bool {
    if !uses_one_gpu_first(choice) {
        return false;
    }
    let found = found();
    let learned = |f: &NvidiaGpus| (f.second_wanted_by.iter().any(|j| j == job), f.refused);
    let (second_wanted, refused) = found.as_ref().map_or((false, false), learned);
    let for_choice = match choice {
        DeviceChoice::Gpu => true,
        DeviceChoice::Auto => !second_wanted,
        _ => !live && !second_wanted,
    };
    let seen = (found.filter(|f| f.shown > 0)).map(|f| f.shown > 1 && f.alike && f.gpu_is_first);
    let several_alike = match (seen, listed()) {
        (Some(seen), Some(listed)) => seen && listed,
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => false,
    };
    for_choice && !refused && several_alike
}

/// Where NVIDIA's kernel driver lists its GPUs, a folder each with an `information` file,
/// readable without loading the OpenCL driver.
const DRIVER_GPUS: &str = "/proc/driver/nvidia/gpus";

/// Whether NVIDIA's kernel driver lists several GPUs in `dir` (`DRIVER_GPUS`), all of one
/// model; None where it cannot be read. Alike GPUs are listed by CUDA, and so by its OpenCL
/// platform, fastest first and then by bus, so `gpu` takes the first of them: whichever it is,
/// it is the model `gpu` means.
fn driver_lists_several_alike(dir: &Path) -> Option<bool> {
    let entries = std::fs::read_dir(dir).ok()?;
    let information = entries.flatten().map(|e| e.path().join("information"));
    let texts = information.filter_map(|path| std::fs::read_to_string(path).ok());
    let models: Vec<String> = texts
        .filter_map(|t| model_of(&t).map(str::to_string))
        .collect();
    Some(models.len() > 1 && models.iter().all(|m| *m == models[0]))
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

/// Shows NVIDIA's driver only the GPU a run of `choice` (on live input or not) uses first,
/// where `narrows` says so. `job` gives the run's shape (`route::record::JobKey`), asked only
/// of a choice that keeps GPUs in reserve (`route::later_devices_in_reserve`): only their
/// runs read or record a job's want of a second GPU, and the shape reads the inputs' sizes.
///
/// # Safety
///
/// To be called by the program's main thread before it starts any other thread (and before
/// OpenCL loads): it changes the process's environment, which another thread reading it
/// meanwhile could see half written.
pub(crate) unsafe fn narrow_gpu_view(
    choice: &DeviceChoice,
    live: bool,
    job: impl FnOnce() -> String,
) {
    let environment = kinds::environment(); // (read here first, before OpenCL loads: see there)
    let job = super::later_devices_in_reserve(choice).then(|| JOB.get_or_init(job).as_str());
    let found = || book().remove(&environment);
    let listed = || driver_lists_several_alike(Path::new(DRIVER_GPUS));
    if !narrows((choice, live, job.unwrap_or_default()), found, listed) {
        return;
    }
    let users = std::env::var(VISIBLE).ok();
    let Some(first) = first_shown(users.as_deref()) else {
        return;
    };
    std::env::set_var(VISIBLE, &first);
    NARROWED.store(true, Ordering::Relaxed);
    NARROWED_RESERVE.store(*choice != DeviceChoice::Gpu, Ordering::Relaxed);
    tracing::debug!(
        "{VISIBLE}={first}: the driver shows the GPU `--device {choice}` uses first alone"
    );
}

/// After a `gpu`, `auto` or `gpu:all` run listed its devices: records what it found
/// (`after_whole_view`, `after_narrowed`). Best effort, as every cache file.
pub(crate) fn remember(choice: &DeviceChoice) {
    if !uses_one_gpu_first(choice) {
        return;
    }
    let Ok(best) = device::best_device() else {
        return;
    };
    update_record(|before| {
        let after = if NARROWED.load(Ordering::Relaxed) {
            after_narrowed(before, &best.info)
        } else {
            let infos: Vec<&DeviceInfo> = device::all_devices().iter().map(|d| &d.info).collect();
            after_whole_view(before, &infos, &best.info)
        };
        tracing::debug!(?after, "what the NVIDIA platform shows `--device {choice}`");
        after
    });
}

/// This driver environment's record (`kinds::environment`) changed by `change` (None: no
/// record), and saved where it changed. Whether it changed.
fn update_record(change: impl FnOnce(Option<NvidiaGpus>) -> Option<NvidiaGpus>) -> bool {
    let mut all = book();
    let environment = kinds::environment();
    let before = all.get(&environment).cloned();
    let after = change(before.clone());
    if after == before {
        return false;
    }
    match after {
        Some(after) => all.insert(environment, after),
        None => all.remove(&environment),
    };
    calibrate::save_cached(path(), &all);
    true
}

/// What a run with the driver's whole view records, `gpu` taking `best`: the NVIDIA platform's
/// devices, keeping what narrowed runs learned; where `best` is not NVIDIA's, only that.
fn after_whole_view(
    before: Option<NvidiaGpus>,
    infos: &[&DeviceInfo],
    best: &DeviceInfo,
) -> Option<NvidiaGpus> {
    let learned = before.filter(|b| !b.second_wanted_by.is_empty() || b.refused);
    let Some(mut found) = nvidia_gpus(infos, best) else {
        return learned.map(|b| NvidiaGpus { shown: 0, ..b });
    };
    if let Some(b) = learned {
        (found.second_wanted_by, found.refused) = (b.second_wanted_by, b.refused);
    }
    Some(found)
}

/// What a narrowed run records, `gpu` taking `best`: a refusal where it is not on NVIDIA's
/// platform; no view where it is another model than the one recorded (the next run looks
/// again); else what was recorded.
fn after_narrowed(before: Option<NvidiaGpus>, best: &DeviceInfo) -> Option<NvidiaGpus> {
    if !on_nvidia_platform(best) {
        let refused = NvidiaGpus {
            refused: true,
            ..before.unwrap_or_default()
        };
        return Some(refused);
    }
    before.filter(|b| b.shown == 0 || b.name == best.name)
}

/// What showing the driver every GPU adds to a device's start-up: its platform took 0.378–0.394
/// s with both of two H200s shown against 0.188 with one (session 31, call 9), rounded up.
const WHOLE_VIEW_START_UP: Duration = Duration::from_millis(200);

/// Called while a run's first GPU works, at each look at its `demand`: a narrowed run of a
/// choice with GPUs in reserve records its job once where a second GPU would have started in a
/// run that showed the driver every GPU (`route::another_device_pays`, with that run's longer
/// start-up), so later such runs of that job show the driver every GPU again. Judged with the
/// narrowed run's own start-up, every job near the line flipped (two H200s, session 32): its
/// narrowed run wanted a second GPU, the next run paid the whole view and found it would not
/// pay, and the run after that was narrowed again.
pub(crate) fn note_if_second_device_wanted(demand: &Demand) {
    static NOTED: AtomicBool = AtomicBool::new(false);
    let Some(job) = JOB.get() else {
        return;
    };
    if !NARROWED_RESERVE.load(Ordering::Relaxed) || !pays_with_the_whole_view(demand) {
        return;
    }
    if NOTED.swap(true, Ordering::Relaxed) {
        return;
    }
    update_record(|before| Some(after_second_wanted(before, job)));
    tracing::debug!(
        "the first GPU bounds the run: later runs of `{job}` show the driver every GPU"
    );
}

/// Whether a second GPU would start, at `demand`, in a run that showed the driver every GPU.
fn pays_with_the_whole_view(demand: &Demand) -> bool {
    let whole_view = Demand {
        start_up: demand.start_up + WHOLE_VIEW_START_UP,
        ..*demand
    };
    super::another_device_pays(&whole_view)
}

/// The record after a run of `job` found a second GPU wanted (a first run narrowed by the
/// kernel driver's list has no view recorded yet: the record then holds only this).
fn after_second_wanted(before: Option<NvidiaGpus>, job: &str) -> NvidiaGpus {
    let mut after = before.unwrap_or_default();
    after.second_wanted_by.retain(|j| j != job);
    after.second_wanted_by.push(job.to_string());
    let over = after.second_wanted_by.len().saturating_sub(WANTED_JOBS);
    after.second_wanted_by.drain(..over);
    after
}

/// Called when a run's GPUs in reserve did not start though the driver showed them all (a run
/// of `auto` or `gpu:all` that was not narrowed, its first GPU watched long enough): where a
/// run of this job had recorded a second GPU wanted, its later runs show the driver one GPU
/// again (`after_reserve_not_started`): a job whose wants changed (another host's load, another
/// input size in its class) gets the narrowing back.
pub(crate) fn note_second_device_not_wanted() {
    let Some(job) = JOB.get().filter(|_| !NARROWED.load(Ordering::Relaxed)) else {
        return;
    };
    if update_record(|before| after_reserve_not_started(before, job)) {
        tracing::debug!("the GPUs in reserve did not start: later runs of `{job}` show one GPU");
    }
}

/// The record after a run of `job` whose GPUs in reserve did not start: that job wants no
/// second GPU.
fn after_reserve_not_started(before: Option<NvidiaGpus>, job: &str) -> Option<NvidiaGpus> {
    before.map(|mut b| {
        b.second_wanted_by.retain(|j| j != job);
        b
    })
}

/// Whether `device` is on NVIDIA's own OpenCL platform (the one `CUDA_VISIBLE_DEVICES` steers).
fn on_nvidia_platform(device: &DeviceInfo) -> bool {
    device.platform_name.contains("NVIDIA")
}

/// The NVIDIA platform's devices as `gpu` (choosing `best`) finds them, from the whole view;
/// None where `best` is not on NVIDIA's own platform.
fn nvidia_gpus(infos: &[&DeviceInfo], best: &DeviceInfo) -> Option<NvidiaGpus> {
    if !on_nvidia_platform(best) {
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
        second_wanted_by: Vec::new(),
        refused: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two job shapes, as `route::record::JobKey` writes them.
    const HOP_512: &str = "frame 4096 hop 512 f32 plain Magnitude input 2^32 cores 32";
    const LARGE: &str = "frame 65536 hop 8192 f32 plain Magnitude input 2^32 cores 32";

    fn wanted_by(jobs: &[&str]) -> NvidiaGpus {
        NvidiaGpus {
            second_wanted_by: jobs.iter().map(|j| j.to_string()).collect(),
            ..found(2, true, true)
        }
    }

    /// One job that wants a second GPU does not take the narrowing from the others (two H200s,
    /// session 31: `gpu:all` on 65536 hop 8192 paid the whole view after hop 512 had wanted a
    /// second GPU, 0.91x `gpu`), and a run whose reserve did not start gives its job's back.
    #[test]
    fn a_second_gpu_is_wanted_per_job_and_a_reserve_that_did_not_start_takes_it_back() {
        let listed = || Some(true);
        let all = |job: &str, record: &NvidiaGpus| {
            narrows(
                (&DeviceChoice::AllGpus, false, job),
                || Some(record.clone()),
                listed,
            )
        };
        let hop_wants = after_second_wanted(Some(found(2, true, true)), HOP_512);
        assert_eq!(hop_wants, wanted_by(&[HOP_512]));
        assert!(!all(HOP_512, &hop_wants), "its job shows every GPU");
        assert!(all(LARGE, &hop_wants), "another job stays narrowed");
        let both = after_second_wanted(Some(hop_wants), LARGE);
        assert_eq!(
            after_second_wanted(Some(both.clone()), LARGE),
            both,
            "once a job"
        );
        let after = after_reserve_not_started(Some(both), LARGE).expect("a record");
        assert_eq!(after, wanted_by(&[HOP_512]), "nothing else changes");
        assert!(all(LARGE, &after) && !all(HOP_512, &after));
        assert_eq!(
            after_reserve_not_started(None, LARGE),
            None,
            "no record, none made"
        );
        let first_run = after_second_wanted(None, HOP_512);
        assert_eq!(
            first_run.shown, 0,
            "no view recorded yet: only what was learned"
        );
        let mut many = found(2, true, true);
        for k in 0..WANTED_JOBS + 3 {
            many = after_second_wanted(Some(many), &format!("job {k}"));
        }
        assert_eq!(many.second_wanted_by.len(), WANTED_JOBS);
        assert_eq!(
            many.second_wanted_by[0], "job 3",
            "the oldest forgotten first"
        );
    }

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

    fn pocl() -> DeviceInfo {
        let mut pocl = h200(0);
        (pocl.platform_index, pocl.platform_name) = (0, "Portable Computing Language".into());
        pocl.name = "cpu-haswell".into();
        pocl
    }

    fn found(shown: usize, alike: bool, gpu_is_first: bool) -> NvidiaGpus {
        NvidiaGpus {
            shown,
            alike,
            gpu_is_first,
            name: "NVIDIA H200".into(),
            ..Default::default()
        }
    }

    /// `narrows` for `choice` on a file, with `record` found and the kernel driver's list.
    fn narrows_with(
        choice: &DeviceChoice,
        record: Option<&NvidiaGpus>,
        listed: Option<bool>,
    ) -> bool {
        narrows((choice, false, HOP_512), || record.cloned(), || listed)
    }

    /// A narrowed run notes a second GPU wanted only where a run with the driver's whole view,
    /// whose start-up is longer, would start it: else the job's runs flip between the two.
    #[test]
    fn a_second_gpu_is_wanted_where_it_would_start_with_every_gpu_shown() {
        let demand = |busy: f64, left_ms: u64| Demand {
            busy,
            left: Some(Duration::from_millis(left_ms)),
            start_up: Duration::from_millis(450),
        };
        let near = demand(0.95, 1500);
        assert!(
            super::super::another_device_pays(&near),
            "with its own start-up"
        );
        assert!(
            !pays_with_the_whole_view(&near),
            "3 x 0.65 s is more than 1.5 s left"
        );
        assert!(pays_with_the_whole_view(&demand(0.95, 2500)));
        assert!(
            !pays_with_the_whole_view(&demand(0.80, 9000)),
            "not bound by the device"
        );
        let unknown = Demand { left: None, ..near };
        assert!(pays_with_the_whole_view(&unknown), "a live input");
    }

    #[test]
    fn gpu_auto_and_gpu_all_on_several_alike_nvidia_gpus_show_the_driver_their_first_alone() {
        let two = found(2, true, true);
        for choice in [DeviceChoice::Gpu, DeviceChoice::Auto, DeviceChoice::AllGpus] {
            assert!(narrows_with(&choice, Some(&two), None), "{choice}");
        }
        let wanted = wanted_by(&[HOP_512]);
        assert!(narrows_with(&DeviceChoice::Gpu, Some(&wanted), None));
        for reserve in [DeviceChoice::Auto, DeviceChoice::AllGpus] {
            assert!(
                !narrows_with(&reserve, Some(&wanted), None),
                "{reserve}: a second paid"
            );
        }
        let live = |choice| narrows((choice, true, HOP_512), || Some(two.clone()), || None);
        assert!(live(&DeviceChoice::Gpu) && live(&DeviceChoice::Auto));
        assert!(
            !live(&DeviceChoice::AllGpus),
            "live gpu:all opens every device first"
        );
        let named = DeviceChoice::OpenCl {
            platform: 1,
            device: 0,
        };
        let list = DeviceChoice::List(vec![DeviceChoice::Gpu, DeviceChoice::Cpu]);
        for other in [DeviceChoice::Cpu, named, list] {
            assert!(!narrows_with(&other, Some(&two), Some(true)), "{other}");
        }
        for apart in [
            found(1, true, true),
            found(2, false, true),
            found(2, true, false),
        ] {
            assert!(
                !narrows_with(&DeviceChoice::Gpu, Some(&apart), None),
                "{apart:?}"
            );
        }
        let refused = NvidiaGpus {
            refused: true,
            ..two.clone()
        };
        assert!(!narrows_with(
            &DeviceChoice::Gpu,
            Some(&refused),
            Some(true)
        ));
    }

    #[test]
    fn the_kernel_drivers_list_decides_alone_before_a_view_and_must_agree_after() {
        assert!(
            narrows_with(&DeviceChoice::Gpu, None, Some(true)),
            "a first run"
        );
        assert!(!narrows_with(&DeviceChoice::Gpu, None, Some(false)));
        assert!(
            !narrows_with(&DeviceChoice::Gpu, None, None),
            "nothing known"
        );
        let two = found(2, true, true);
        assert!(narrows_with(&DeviceChoice::Gpu, Some(&two), Some(true)));
        assert!(
            !narrows_with(&DeviceChoice::Gpu, Some(&two), Some(false)),
            "a GPU added"
        );
        let learned_only = after_second_wanted(None, HOP_512);
        assert!(narrows_with(
            &DeviceChoice::Gpu,
            Some(&learned_only),
            Some(true)
        ));
        assert!(!narrows_with(
            &DeviceChoice::Auto,
            Some(&learned_only),
            Some(true)
        ));
    }

    #[test]
    fn the_kernel_drivers_list_is_read_from_each_gpus_information_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gpu = |bus: &str, model: &str| {
            let folder = dir.path().join(bus);
            std::fs::create_dir_all(&folder).expect("gpu folder");
            let text = format!("Model: \t\t {model}\nIRQ:   \t\t 41\nBus Location: \t {bus}\n");
            std::fs::write(folder.join("information"), text).expect("information");
        };
        assert_eq!(driver_lists_several_alike(&dir.path().join("none")), None);
        gpu("0000:00:06.0", "NVIDIA H200");
        assert_eq!(
            driver_lists_several_alike(dir.path()),
            Some(false),
            "one GPU"
        );
        gpu("0000:00:07.0", "NVIDIA H200");
        assert_eq!(driver_lists_several_alike(dir.path()), Some(true));
        gpu("0000:00:08.0", "NVIDIA L4");
        assert_eq!(
            driver_lists_several_alike(dir.path()),
            Some(false),
            "two models"
        );
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
    fn a_whole_view_records_the_nvidia_platform_and_keeps_what_narrowed_runs_learned() {
        let (first, second, pocl) = (h200(0), h200(1), pocl());
        let infos = [&pocl, &first, &second];
        assert_eq!(nvidia_gpus(&infos, &first), Some(found(2, true, true)));
        assert_eq!(nvidia_gpus(&infos, &second), Some(found(2, true, false)));
        assert_eq!(nvidia_gpus(&infos, &pocl), None, "not NVIDIA's platform");
        let mut smaller = h200(1);
        smaller.compute_units = 114;
        let apart = nvidia_gpus(&[&pocl, &first, &smaller], &first);
        assert_eq!(apart, Some(found(2, false, true)));
        let wanted = after_second_wanted(None, HOP_512);
        let after = after_whole_view(Some(wanted.clone()), &infos, &first);
        assert_eq!(after, Some(wanted_by(&[HOP_512])));
        assert_eq!(
            after_whole_view(Some(wanted.clone()), &infos, &pocl),
            Some(wanted)
        );
        assert_eq!(
            after_whole_view(Some(found(2, true, true)), &infos, &pocl),
            None
        );
    }

    #[test]
    fn a_narrowed_run_refuses_a_view_without_nvidia_and_forgets_one_of_another_model() {
        let two = found(2, true, true);
        let refused = after_narrowed(Some(two.clone()), &pocl());
        assert!(refused.is_some_and(|r| r.refused && r.shown == 2));
        assert!(
            after_narrowed(None, &pocl()).is_some_and(|r| r.refused),
            "a first run"
        );
        assert_eq!(
            after_narrowed(Some(two.clone()), &h200(0)),
            Some(two.clone())
        );
        let mut l4 = h200(0);
        l4.name = "NVIDIA L4".into();
        assert_eq!(
            after_narrowed(Some(two), &l4),
            None,
            "another model: look again"
        );
        assert_eq!(after_narrowed(None, &l4), None);
    }
}
