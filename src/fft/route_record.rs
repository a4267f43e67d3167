//! What `auto` has seen of its two ways of running a file job on this machine: the CPU engines
//! alone, or the CPU engines with a GPU's engines joining when ready (`router::build_engine_set`).
//! Each run records its end-to-end rate (input samples per second of wall time, start-up
//! included) in the cache folder, under its job's shape (`JobKey`: frame, hop, precision,
//! products, input size class, and the cores this process may use); the next run of that shape
//! takes the faster way, and first tries each way it has no figure for. So `auto` follows what this machine's whole pipeline delivers, not only
//! what its kernels do: on a host whose readers bound both routes, the GPU's start-up and
//! transfers make it the slower way, and `auto` stops using it for files.

use super::calibrate::cache_dir;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What tells jobs apart for `auto`: the same job on fewer cores, with overlap, in f64 or with
/// products can be won by the other route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobKey(String);

impl JobKey {
    /// `frame` and `hop` in samples (0: a whole input per frame), `products` a short label of
    /// the products, `input_bytes` the input's size (in classes of factors of 4), `cores` those
    /// this process may use (affinity and cgroup quota: `limits::cores`).
    pub fn new(
        (frame, hop): (usize, usize),
        precision: &str,
        products: &str,
        input_bytes: u64,
        cores: usize,
    ) -> Self {
        let size_class = (64 - input_bytes.max(1).leading_zeros()) / 2 * 2;
        JobKey(format!(
            "frame {frame} hop {hop} {precision} {products} input 2^{size_class} cores {cores}"
        ))
    }
}

/// Every job shape's record, as saved.
#[derive(Default, Serialize, Deserialize)]
struct RouteBook {
    jobs: BTreeMap<String, RouteRecord>,
}

/// The two ways `auto` can run a file job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoRoute {
    CpuOnly,
    /// The CPU engines until a GPU's lane joins, then the GPU's alone (the CPU lane retires).
    GpuOnly,
    /// The CPU engines, and a GPU's beside them once ready.
    WithGpu,
}

/// Measured end-to-end rates, samples per second (a running mean of the last runs).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct RouteRecord {
    cpu_only: Option<f64>,
    #[serde(default)]
    gpu_only: Option<f64>,
    with_gpu: Option<f64>,
    /// Runs recorded; every `RETRY_EVERY`th run takes the slower way again, so one unlucky
    /// figure cannot shut a way out for good.
    #[serde(default)]
    runs: u64,
}

/// How often `auto` tries the way its record says is slower.
const RETRY_EVERY: u64 = 16;

impl RouteRecord {
    fn path() -> Option<PathBuf> {
        cache_dir().map(|d| d.join("auto-end-to-end-v2.json"))
    }

    fn book() -> RouteBook {
        Self::path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// The record of `job` on disk; empty when there is none (or it cannot be read).
    pub fn load(job: &JobKey) -> Self {
        Self::book().jobs.get(&job.0).copied().unwrap_or_default()
    }

    /// The way to run the next job: one without a figure first (CPU alone, then the GPU alone,
    /// then both), then the fastest; every `RETRY_EVERY`th run the runner-up.
    pub fn choose(&self) -> AutoRoute {
        let ways = [
            (AutoRoute::CpuOnly, self.cpu_only),
            (AutoRoute::GpuOnly, self.gpu_only),
            (AutoRoute::WithGpu, self.with_gpu),
        ];
        if let Some((way, _)) = ways.iter().find(|(_, rate)| rate.is_none()) {
            return *way;
        }
        let mut ranked: Vec<(AutoRoute, f64)> =
            ways.iter().map(|&(w, r)| (w, r.unwrap_or(0.0))).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let retry = self.runs % RETRY_EVERY == RETRY_EVERY - 1;
        ranked[usize::from(retry)].0
    }

    /// Adds a run's rate (mean with the previous figure, so one noisy run cannot flip the choice
    /// for good) and saves the record. Saving is best effort: a read-only cache only means no
    /// memory.
    pub fn record(job: &JobKey, route: AutoRoute, samples_per_s: f64) {
        if !(samples_per_s.is_finite() && samples_per_s > 0.0) {
            return;
        }
        let mut book = Self::book();
        let record = book.jobs.entry(job.0.clone()).or_default();
        let slot = match route {
            AutoRoute::CpuOnly => &mut record.cpu_only,
            AutoRoute::GpuOnly => &mut record.gpu_only,
            AutoRoute::WithGpu => &mut record.with_gpu,
        };
        *slot = Some(slot.map_or(samples_per_s, |old| (old + samples_per_s) / 2.0));
        record.runs += 1;
        let Some(path) = Self::path() else { return };
        let (Some(dir), Ok(text)) = (path.parent(), serde_json::to_string(&book)) else {
            return;
        };
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let saved = std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&tmp, text))
            .and_then(|_| std::fs::rename(&tmp, &path));
        if let Err(e) = saved {
            tracing::debug!("cannot save {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_keys_tell_shapes_and_cores_apart() {
        let key = |hop, bytes, cores| JobKey::new((4096, hop), "f32", "plain", bytes, cores);
        assert_eq!(key(512, 1 << 30, 16), key(512, (1 << 30) + 5, 16));
        assert_ne!(key(512, 1 << 30, 16), key(4096, 1 << 30, 16));
        assert_ne!(key(512, 1 << 30, 16), key(512, 1 << 30, 4));
        assert_ne!(key(512, 1 << 30, 16), key(512, 1 << 20, 16));
    }

    #[test]
    fn tries_each_route_then_takes_the_faster() {
        let mut r = RouteRecord::default();
        assert_eq!(r.choose(), AutoRoute::CpuOnly);
        r.cpu_only = Some(10.0);
        assert_eq!(r.choose(), AutoRoute::GpuOnly);
        r.gpu_only = Some(30.0);
        assert_eq!(r.choose(), AutoRoute::WithGpu);
        r.with_gpu = Some(5.0);
        assert_eq!(r.choose(), AutoRoute::GpuOnly);
        r.with_gpu = Some(40.0);
        assert_eq!(r.choose(), AutoRoute::WithGpu);
        r.runs = RETRY_EVERY - 1;
        assert_eq!(
            r.choose(),
            AutoRoute::GpuOnly,
            "the runner-up, now and then"
        );
    }
}
