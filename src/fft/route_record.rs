//! What `auto` has seen of its two ways of running a file job on this machine: the CPU engines
//! alone, or the CPU engines with a GPU's engines joining when ready (`router::build_engine_set`).
//! Each run records its end-to-end rate (input samples per second of wall time, start-up
//! included) in the cache folder; the next run takes the faster way, and first tries each way it
//! has no figure for. So `auto` follows what this machine's whole pipeline delivers, not only
//! what its kernels do: on a host whose readers bound both routes, the GPU's start-up and
//! transfers make it the slower way, and `auto` stops using it for files.

use super::calibrate::cache_dir;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The two ways `auto` can run a file job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoRoute {
    CpuOnly,
    WithGpu,
}

/// Measured end-to-end rates, samples per second (a running mean of the last runs).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct RouteRecord {
    cpu_only: Option<f64>,
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
        cache_dir().map(|d| d.join("auto-end-to-end-v1.json"))
    }

    /// The record on disk; empty when there is none (or it cannot be read).
    pub fn load() -> Self {
        Self::path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// The way to run the next job: one without a figure first (CPU alone before GPU), then the
    /// faster.
    pub fn choose(&self) -> AutoRoute {
        let retry = self.runs % RETRY_EVERY == RETRY_EVERY - 1;
        match (self.cpu_only, self.with_gpu) {
            (None, _) => AutoRoute::CpuOnly,
            (Some(_), None) => AutoRoute::WithGpu,
            (Some(cpu), Some(gpu)) if (gpu > cpu) != retry => AutoRoute::WithGpu,
            _ => AutoRoute::CpuOnly,
        }
    }

    /// Adds a run's rate (mean with the previous figure, so one noisy run cannot flip the choice
    /// for good) and saves the record. Saving is best effort: a read-only cache only means no
    /// memory.
    pub fn record(mut self, route: AutoRoute, samples_per_s: f64) {
        if !(samples_per_s.is_finite() && samples_per_s > 0.0) {
            return;
        }
        let slot = match route {
            AutoRoute::CpuOnly => &mut self.cpu_only,
            AutoRoute::WithGpu => &mut self.with_gpu,
        };
        *slot = Some(slot.map_or(samples_per_s, |old| (old + samples_per_s) / 2.0));
        self.runs += 1;
        let Some(path) = Self::path() else { return };
        let (Some(dir), Ok(text)) = (path.parent(), serde_json::to_string(&self)) else {
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
    fn tries_each_route_then_takes_the_faster() {
        let mut r = RouteRecord::default();
        assert_eq!(r.choose(), AutoRoute::CpuOnly);
        r.cpu_only = Some(10.0);
        assert_eq!(r.choose(), AutoRoute::WithGpu);
        r.with_gpu = Some(5.0);
        assert_eq!(r.choose(), AutoRoute::CpuOnly);
        r.with_gpu = Some(20.0);
        assert_eq!(r.choose(), AutoRoute::WithGpu);
        r.runs = RETRY_EVERY - 1;
        assert_eq!(
            r.choose(),
            AutoRoute::CpuOnly,
            "the slower way, now and then"
        );
    }
}
