//! OpenCL platforms and devices: one enumeration per process (guarded by a `OnceLock`, because
//! PoCL 3.1 can return no devices when several threads enumerate at once), the text `fftd devices`
//! prints, the choice of "the best device" for `--device gpu`, and the shared per-device state
//! (context, program cache, pinned host memory) that every OpenCL engine on that device (or on
//! one instance of it, when `--device` lists it twice) uses.

use crate::setup_log::{timed, What};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use std::cmp::Reverse;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

/// What fftd knows about one OpenCL device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// Index of the platform in enumeration order (the P of `opencl:P:D`).
    pub platform_index: usize,
    /// Index of the device on its platform (the D of `opencl:P:D`).
    pub device_index: usize,
    pub platform_name: String,
    pub name: String,
    pub vendor: String,
    /// Driver version string (part of the calibration cache key).
    pub driver: String,
    /// Device OpenCL version string.
    pub version: String,
    pub compute_units: u32,
    pub global_mem: u64,
    /// The largest single buffer the device allocates (CL_DEVICE_MAX_MEM_ALLOC_SIZE; 0: unknown).
    pub max_alloc: u64,
    pub local_mem: u64,
    pub max_work_group: usize,
    pub fp64: bool,
    pub is_gpu: bool,
}

impl DeviceInfo {
    /// "opencl:P:D".
    pub fn address(&self) -> String {
        format!("opencl:{}:{}", self.platform_index, self.device_index)
    }
}

/// One enumerated device: its description and its handle.
#[derive(Clone, Debug)]
pub struct DeviceEntry {
    pub info: DeviceInfo,
    pub device: Device,
}

/// One enumerated platform.
#[derive(Clone, Debug)]
pub(crate) struct PlatformEntry {
    pub index: usize,
    pub name: String,
    pub vendor: String,
    pub version: String,
    pub devices: Vec<DeviceEntry>,
    /// Why the device list could not be read, if it could not.
    pub error: Option<String>,
}

/// The result of enumerating OpenCL once: the platforms, or why there are none.
pub(crate) type Inventory = Result<Vec<PlatformEntry>, String>;

static INVENTORY: OnceLock<Inventory> = OnceLock::new();

/// All OpenCL platforms and devices, enumerated once per process.
pub(crate) fn inventory() -> &'static Inventory {
    INVENTORY.get_or_init(|| timed(What::Platform, String::new, (0, 0), enumerate))
}

fn enumerate() -> Inventory {
    let platforms = get_platforms().map_err(|e| match e.0 {
        // -1001 = CL_PLATFORM_NOT_FOUND_KHR; also what opencl3 answers when libOpenCL is missing
        -1001 => "no OpenCL platform found (no OpenCL runtime/ICD installed)".to_string(),
        _ => format!("OpenCL platform query failed: {e}"),
    })?;
    let mut out = Vec::new();
    for (pi, p) in platforms.iter().enumerate() {
        let mut entry = PlatformEntry {
            index: pi,
            name: p.name().unwrap_or_default().trim().to_string(),
            vendor: p.vendor().unwrap_or_default().trim().to_string(),
            version: p.version().unwrap_or_default().trim().to_string(),
            devices: Vec::new(),
            error: None,
        };
        match p.get_devices(CL_DEVICE_TYPE_ALL) {
            Ok(ids) => {
                for (di, id) in ids.into_iter().enumerate() {
                    let d = Device::new(id);
                    let info = DeviceInfo {
                        platform_index: pi,
                        device_index: di,
                        platform_name: entry.name.clone(),
                        name: d.name().unwrap_or_default().trim().to_string(),
                        vendor: d.vendor().unwrap_or_default().trim().to_string(),
                        driver: d.driver_version().unwrap_or_default().trim().to_string(),
                        version: d.version().unwrap_or_default().trim().to_string(),
                        compute_units: d.max_compute_units().unwrap_or(0),
                        global_mem: d.global_mem_size().unwrap_or(0),
                        max_alloc: d.max_mem_alloc_size().unwrap_or(0),
                        local_mem: d.local_mem_size().unwrap_or(0),
                        max_work_group: d.max_work_group_size().unwrap_or(1),
                        fp64: d
                            .extensions()
                            .map(|e| e.contains("cl_khr_fp64"))
                            .unwrap_or(false),
                        is_gpu: d
                            .dev_type()
                            .map(|t| t & CL_DEVICE_TYPE_GPU != 0)
                            .unwrap_or(false),
                    };
                    entry.devices.push(DeviceEntry { info, device: d });
                }
            }
            // CL_DEVICE_NOT_FOUND: a platform with no devices is not an error
            Err(e) if e.0 == -1 => {}
            Err(e) => entry.error = Some(format!("device query failed: {e}")),
        }
        out.push(entry);
    }
    Ok(out)
}

/// Every device of every platform, in enumeration order.
pub fn all_devices() -> Vec<&'static DeviceEntry> {
    match inventory() {
        Ok(ps) => ps.iter().flat_map(|p| p.devices.iter()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The device `--device gpu` means: a GPU-type device if there is one (`gpu_preference`),
/// otherwise the first OpenCL device of any type. `Err` says why there is none.
pub fn best_device() -> Result<&'static DeviceEntry, String> {
    if let Err(e) = inventory() {
        return Err(e.clone());
    }
    let all = all_devices();
    all.iter()
        .filter(|d| d.info.is_gpu)
        .max_by_key(|d| gpu_preference(&d.info))
        .or_else(|| all.first())
        .copied()
        .ok_or_else(|| "OpenCL is installed but no platform has a device".to_string())
}

/// How `--device gpu` ranks GPUs, the highest taken: the most compute units, then the first
/// listed, as CUDA's default device is the first (of alike GPUs, `route::gpu_view` can then
/// show the driver that one alone).
pub(crate) fn gpu_preference(info: &DeviceInfo) -> (u32, Reverse<usize>, Reverse<usize>) {
    let listed = (info.platform_index, info.device_index);
    (info.compute_units, Reverse(listed.0), Reverse(listed.1))
}

/// The device at `opencl:P:D`.
pub(crate) fn device_at(platform: usize, device: usize) -> Result<&'static DeviceEntry, String> {
    let ps = inventory().as_ref().map_err(Clone::clone)?;
    let p = ps.get(platform).ok_or_else(|| {
        format!(
            "no OpenCL platform {platform} (there are {}; see `fftd devices`)",
            ps.len()
        )
    })?;
    p.devices.get(device).ok_or_else(|| {
        format!(
            "OpenCL platform {platform} ({}) has no device {device} (it has {}; see `fftd devices`)",
            p.name,
            p.devices.len()
        )
    })
}

fn human_bytes(b: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    let f = b as f64;
    if f >= GIB {
        format!("{:.1} GiB", f / GIB)
    } else if f >= MIB {
        format!("{:.1} MiB", f / MIB)
    } else {
        format!("{} KiB", b / 1024)
    }
}

/// The OpenCL section of `fftd devices`: every platform and device with name, vendor, compute
/// units, global and local memory and fp64 support, and the one `--device gpu` would use; or a
/// plain sentence saying there is no OpenCL.
pub fn describe_devices() -> String {
    let mut s = String::new();
    match inventory() {
        Err(e) => {
            let _ = writeln!(
                s,
                "OpenCL: none ({e}). fftd runs every transform on the CPU; --device gpu will fail."
            );
        }
        Ok(ps) if ps.is_empty() => {
            let _ = writeln!(
                s,
                "OpenCL: no platform found. fftd runs every transform on the CPU."
            );
        }
        Ok(ps) => {
            let _ = writeln!(
                s,
                "OpenCL platforms and devices (use with --device opencl:P:D):"
            );
            for p in ps {
                let _ = writeln!(
                    s,
                    "  platform {}: {} ({}), {}",
                    p.index, p.name, p.vendor, p.version
                );
                if let Some(e) = &p.error {
                    let _ = writeln!(s, "    ({e})");
                } else if p.devices.is_empty() {
                    let _ = writeln!(s, "    (no devices)");
                }
                for d in &p.devices {
                    let i = &d.info;
                    let _ = writeln!(
                        s,
                        "    {}  {} [{}] vendor {}, {} compute units, global {}, local {}, fp64 {}, driver {}",
                        i.address(),
                        i.name,
                        if i.is_gpu { "GPU" } else { "non-GPU" },
                        i.vendor,
                        i.compute_units,
                        human_bytes(i.global_mem),
                        human_bytes(i.local_mem),
                        if i.fp64 { "yes" } else { "no" },
                        i.driver
                    );
                }
            }
            match best_device() {
                Ok(d) => {
                    let _ = writeln!(
                        s,
                        "  --device gpu uses {} ({})",
                        d.info.address(),
                        d.info.name
                    );
                    let gpus: Vec<String> = all_devices()
                        .iter()
                        .filter(|g| g.info.is_gpu)
                        .map(|g| g.info.address())
                        .collect();
                    let _ = match gpus.is_empty() {
                        true => writeln!(
                            s,
                            "  --device gpu:all uses {} (no GPU-type device: the same as gpu)",
                            d.info.address()
                        ),
                        false => writeln!(s, "  --device gpu:all uses {}", gpus.join(", ")),
                    };
                }
                Err(e) => {
                    let _ = writeln!(s, "  --device gpu: {e}");
                }
            }
        }
    }
    s
}

/// Per-device state shared by all engines (worker threads) on one device: the context and the
/// built programs. Queues, buffers and kernel objects stay per engine (`Kernel` is not `Sync`).
pub(crate) struct SharedDevice {
    pub info: DeviceInfo,
    pub device: Device,
    pub context: Context,
    programs: Mutex<HashMap<String, Arc<OnceLock<ProgramResult>>>>,
    /// Pinned host blocks handed out on this device (`super::pinned`).
    pub(super) pinned: super::pinned::PinnedRegistry,
}

impl std::fmt::Debug for SharedDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedDevice")
            .field("info", &self.info)
            .finish()
    }
}

type ProgramResult = Result<Arc<Program>, String>;

type OpenResult = Result<Arc<SharedDevice>, String>;

/// Open devices by (platform, device, instance); each opened once (a failure too).
type OpenDevices = Mutex<HashMap<(usize, usize, usize), Arc<OnceLock<OpenResult>>>>;
static OPEN: OnceLock<OpenDevices> = OnceLock::new();

impl SharedDevice {
    /// The shared state for `entry`, created on first use (one context per device per process).
    pub(crate) fn open(entry: &DeviceEntry) -> Result<Arc<SharedDevice>, String> {
        Self::open_instance(entry, 1)
    }

    /// The shared state of instance `instance` (1-based) of `entry`: each instance has its own
    /// context, programs and pinned memory, as if it were another device (`--device` lists
    /// naming a device twice); instance 1 is the one `open` gives. Different devices open at
    /// the same time (a GPU context takes a good part of a second), the same one once.
    pub(crate) fn open_instance(entry: &DeviceEntry, instance: usize) -> OpenResult {
        let key = (entry.info.platform_index, entry.info.device_index, instance);
        let slot = OPEN
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .map_err(|_| "device table lock poisoned".to_string())?
            .entry(key)
            .or_default()
            .clone();
        let create = || Self::create(entry);
        slot.get_or_init(|| timed(What::Context, || entry.info.address(), (0, 0), create))
            .clone()
    }

    fn create(entry: &DeviceEntry) -> OpenResult {
        // one context made at a time: two made at once on NVIDIA's driver took 0.36–0.37 s each
        // against 0.135 s for one alone (`gpu:all` on two H200s, docs/perf.md, issue 30), so in
        // turn the first device is ready sooner and both no later
        static MAKING: Mutex<()> = Mutex::new(());
        let _one_at_a_time = MAKING.lock().unwrap_or_else(|e| e.into_inner());
        let context = Context::from_device(&entry.device).map_err(|e| {
            format!(
                "cannot create an OpenCL context on {}: {e}",
                entry.info.name
            )
        })?;
        Ok(Arc::new(SharedDevice {
            info: entry.info.clone(),
            device: entry.device,
            context,
            programs: Mutex::new(HashMap::new()),
            pinned: Default::default(),
        }))
    }

    /// The program `name` built from `sources` with `options`, built once per device and cached
    /// (failures too, so a bad kernel is not rebuilt for every batch). Workers asking for the
    /// same program at once wait for one build (a first NVIDIA build takes ~0.9 s).
    pub(crate) fn program(
        &self,
        name: &str,
        sources: &[&str],
        options: &str,
    ) -> Result<Arc<Program>, String> {
        let key = format!("{name} {options}");
        let slot = self
            .programs
            .lock()
            .map_err(|_| "program cache lock poisoned")?
            .entry(key)
            .or_default()
            .clone();
        let build = || self.build(sources, options);
        slot.get_or_init(|| timed(What::Program, || self.info.address(), (1, 0), build))
            .clone()
    }

    fn build(&self, sources: &[&str], options: &str) -> Result<Arc<Program>, String> {
        let t = std::time::Instant::now();
        // one concatenated string: opencl3's multi-source path crashed PoCL 3.1
        let source: String = sources.concat();
        let built = Program::create_and_build_from_source(&self.context, &source, options)
            .map(Arc::new)
            .map_err(|e| format!("kernel build failed on {} ({options}): {e}", self.info.name));
        tracing::debug!(
            device = %self.info.name,
            options,
            ms = t.elapsed().as_secs_f64() * 1e3,
            ok = built.is_ok(),
            "built OpenCL program"
        );
        built
    }
}
