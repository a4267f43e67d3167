//! What `auto` has seen of its three ways of running a file job on this machine: the CPU
//! engines alone, the GPU alone once it is up (the CPU engines bridge its start-up), or both
//! (`super::plan`). Each run records its end-to-end rate (input samples per second
//! of wall time, start-up included) in the cache folder, under its job's shape (`JobKey`:
//! frame, hop, precision, products, input size class, and the cores this process may use). A run
//! of the GPU alone also records the CPU engines' figure from their bridge over the device's
//! start-up (`cpu_bridge`: the run's set-up plus every sample at the rate the CPU lane went until
//! the device joined; the whole run when none joined), a figure for the CPU alone that costs no
//! run of its own. Only whole file jobs are recorded (`pipeline::run_steps::teaches_auto`, then `learn`); other
//! runs, and any run with no cache folder, take the CPU alone.
//!
//! How it decides (`RouteRecord::choose`): a new job runs the GPU alone, which measures both
//! routes at once. Then only ways predicted within `CLOSE` (10 %) of the best way's figure are
//! tried, up to `TRIALS` figures each: the CPU alone within `BRIDGE_CLOSE` (25 %) while it is
//! judged by its bridge only (the bridge shares its cores with the device's start-up, so it
//! reads low), and both lanes only where the two ways alone are within 10 % of each other
//! (where one is far ahead, the other's cores and host time serve it better: on the H200 host
//! the GPU alone beat both lanes on every job it won by more). A way is judged by the best of
//! its last `TRIALS` figures (a noisy run is a slow one); every `RETRY_EVERY`th run takes a
//! close runner-up again. When both lanes are the best way, they share batches in proportion to
//! the rates each way delivered alone (`RouteRecord::shares`). So `auto` follows what this
//! machine's whole pipeline delivers, not only what its kernels do.

use crate::fft::calibrate::{self, cache_dir};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// What tells jobs apart for `auto`: the same job on fewer cores, with overlap, in f64 or with
/// products can be won by the other route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobKey(String);

impl JobKey {
    /// `frame` and `hop` in samples (0: a whole input per frame), `products` a short label of
    /// the products, `input_bytes` the input's size (in classes of factors of 4), `cores` those
    /// this process may use (affinity and cgroup quota: `limits::cores`).
    pub(crate) fn new(
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

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Every job shape's record, as saved.
#[derive(Default, Serialize, Deserialize)]
struct RouteBook {
    jobs: BTreeMap<String, RouteRecord>,
}

/// The two ways `auto` can run a file job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AutoRoute {
    CpuOnly,
    /// The CPU engines until a GPU's lane joins, then the GPU's alone (the CPU lane retires).
    GpuOnly,
    /// The CPU engines, and a GPU's beside them once ready.
    WithGpu,
}

/// Measured end-to-end rates, samples per second: each way's last `TRIALS` figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct RouteRecord {
    #[serde(default)]
    cpu_only: Vec<f64>,
    #[serde(default)]
    gpu_only: Vec<f64>,
    #[serde(default)]
    with_gpu: Vec<f64>,
    /// The CPU engines' rate while they bridged the GPU's start-up in runs of the GPU alone.
    #[serde(default)]
    cpu_bridge: Vec<f64>,
    /// Runs recorded; every `RETRY_EVERY`th run takes the runner-up again when it is within
    /// `CLOSE` of the best (a trial that costs at most that much).
    #[serde(default)]
    runs: u64,
    /// Whether a device joined a run of this job. Until one has, both lanes together get no
    /// trial: a run of the GPU alone whose device came up too late ran the CPU engines alone,
    /// and so would both lanes, with a device start-up beside them (session 34: at 1 GiB on
    /// 16 and 32 cores no device joined, and `auto` spent its second and third runs so).
    #[serde(default = "kept_before_joins_were")]
    device_joined: bool,
}

/// A record kept before `device_joined` was: its trials go on as they did.
fn kept_before_joins_were() -> bool {
    true
}

/// Figures kept per way; a way is judged by its best (a noisy run is a slow one: the machine
/// was busy, the page cache cold), so one unlucky trial cannot shut a way out.
const TRIALS: usize = 3;

/// Ways whose best is within this factor of the best way's are tried again until they have
/// `TRIALS` figures: such a trial costs at most 10 % of the job. A way further behind is not
/// tried again (until the best way's own figures fall that far).
const CLOSE: f64 = 1.10;

/// The CPU alone judged only by its bridge is tried when within this factor of the best: the
/// bridge shares its cores with the device's start-up, so it reads low.
const BRIDGE_CLOSE: f64 = 1.25;

/// How often `auto` tries a close runner-up once every close way has its trials.
const RETRY_EVERY: u64 = 16;

impl RouteRecord {
    fn path() -> Option<PathBuf> {
        cache_dir().map(|d| d.join("auto-end-to-end-v3.json"))
    }

    fn book() -> RouteBook {
        calibrate::load_cached(Self::path())
    }

    /// Whether records can be kept at all (a cache folder is known).
    pub(crate) fn kept() -> bool {
        Self::path().is_some()
    }

    /// The record of `job` on disk; empty when there is none (or it cannot be read).
    pub(crate) fn load(job: &JobKey) -> Self {
        Self::book().jobs.get(&job.0).cloned().unwrap_or_default()
    }

    fn figures(&self, way: AutoRoute) -> &Vec<f64> {
        match way {
            AutoRoute::CpuOnly => &self.cpu_only,
            AutoRoute::GpuOnly => &self.gpu_only,
            AutoRoute::WithGpu => &self.with_gpu,
        }
    }

    /// A way's best figure, None before its first trial.
    fn best(&self, way: AutoRoute) -> Option<f64> {
        self.figures(way).iter().copied().reduce(f64::max)
    }

    /// The CPU engines' figure for ranking: their best whole run, or else their best bridge.
    fn cpu_estimate(&self) -> Option<f64> {
        let bridge = self.cpu_bridge.iter().copied().reduce(f64::max);
        self.best(AutoRoute::CpuOnly).or(bridge)
    }

    /// Each way in play with the figure it is ranked by: the CPU alone by its estimate; both
    /// lanes by their best, or, untried, by the slower way alone when the two ways alone are
    /// within `CLOSE` of each other and a device has joined a run (so they get a trial), else
    /// not at all.
    fn in_play(&self, gpu: f64) -> Vec<(AutoRoute, f64)> {
        let cpu = self.cpu_estimate().unwrap_or(0.0);
        let even = cpu * CLOSE >= gpu && gpu * CLOSE >= cpu;
        let both = self
            .best(AutoRoute::WithGpu)
            .or_else(|| (even && self.device_joined).then(|| cpu.min(gpu)));
        let mut ways = vec![(AutoRoute::CpuOnly, cpu), (AutoRoute::GpuOnly, gpu)];
        ways.extend(both.map(|rate| (AutoRoute::WithGpu, rate)));
        ways
    }

    /// How close to the best a way must be to get a trial: `BRIDGE_CLOSE` for the CPU alone
    /// judged only by its bridge, else `CLOSE`.
    fn closeness(&self, way: AutoRoute) -> f64 {
        match way == AutoRoute::CpuOnly && self.cpu_only.is_empty() {
            true => BRIDGE_CLOSE,
            false => CLOSE,
        }
    }

    /// The way to run the next job: the GPU alone first (it measures the CPU engines too);
    /// then a way within `CLOSE` of the best that has fewer than `TRIALS` figures (the fewest
    /// first); then the way with the best figure, and every `RETRY_EVERY`th run the runner-up
    /// when it is within `CLOSE`.
    pub(crate) fn choose(&self) -> AutoRoute {
        let Some(gpu) = self.best(AutoRoute::GpuOnly) else {
            return AutoRoute::GpuOnly;
        };
        let mut ranked = self.in_play(gpu);
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top = ranked[0].1;
        let close: Vec<AutoRoute> = ranked
            .iter()
            .filter(|(way, rate)| rate * self.closeness(*way) >= top)
            .map(|(w, _)| *w)
            .collect();
        let untried = close
            .iter()
            .filter(|w| self.figures(**w).len() < TRIALS)
            .min_by_key(|w| self.figures(**w).len());
        if let Some(way) = untried {
            return *way;
        }
        let retry = self.runs % RETRY_EVERY == RETRY_EVERY - 1 && close.len() > 1;
        close[usize::from(retry)]
    }

    /// Both lanes' rates when each way alone has a figure: (CPU engines alone, GPU alone), for a
    /// split of the batches in proportion (`super::LaneSpeed::Rate`).
    pub(crate) fn shares(&self) -> Option<(f64, f64)> {
        Some((
            self.best(AutoRoute::CpuOnly)?,
            self.best(AutoRoute::GpuOnly)?,
        ))
    }

    /// Adds a run's rate (the way's oldest of `TRIALS` figures goes), for a run of the GPU
    /// alone the CPU engines' bridge rate, and whether a device joined it; saves the record.
    /// Saving is best effort: a read-only cache only means no memory.
    pub(crate) fn record(
        job: &JobKey,
        route: AutoRoute,
        samples_per_s: f64,
        bridge: Option<f64>,
        joined: bool,
    ) {
        if !usable(samples_per_s) {
            return;
        }
        let mut book = Self::book();
        let record = book.jobs.entry(job.0.clone()).or_default();
        record.note(route, samples_per_s, bridge, joined);
        calibrate::save_cached(Self::path(), &book);
    }

    /// A run's figures: its rate, its bridge rate when it ran the GPU alone, and whether a
    /// device joined it.
    fn note(&mut self, route: AutoRoute, samples_per_s: f64, bridge: Option<f64>, joined: bool) {
        self.add(route, samples_per_s);
        self.device_joined |= joined;
        let bridge = bridge.filter(|&b| usable(b) && route == AutoRoute::GpuOnly);
        if let Some(bridge) = bridge {
            keep_last(&mut self.cpu_bridge, bridge);
        }
    }

    fn add(&mut self, route: AutoRoute, samples_per_s: f64) {
        let figures = match route {
            AutoRoute::CpuOnly => &mut self.cpu_only,
            AutoRoute::GpuOnly => &mut self.gpu_only,
            AutoRoute::WithGpu => &mut self.with_gpu,
        };
        keep_last(figures, samples_per_s);
        self.runs += 1;
    }
}

/// The CPU engines' bridge over a device's start-up: the frames the CPU lane had finished when
/// the device's lanes joined, and when the stages had started and the lanes joined.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bridge {
    pub cpu_frames: u64,
    pub stages_started: Instant,
    pub joined: Instant,
}

/// What a finished job did, as `learn` takes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunFigures {
    /// Input samples analysed, and frames transformed by every lane together.
    pub samples: f64,
    pub frames: u64,
    pub started: Instant,
    /// None when no device joined: the CPU engines did it all.
    pub bridge: Option<Bridge>,
}

/// What `auto` learns from a finished job (not one cut short) run `route`'s way: its
/// end-to-end rate, and the CPU engines' rate predicted from their bridge (`cpu_alone_rate`).
pub(crate) fn learn(job: &JobKey, route: AutoRoute, run: RunFigures) {
    let rate = run.samples / run.started.elapsed().as_secs_f64();
    let bridge = match run.bridge {
        Some(bridge) => cpu_alone_rate(bridge, &run),
        None => Some(rate),
    };
    RouteRecord::record(job, route, rate, bridge, run.bridge.is_some());
}

/// The end-to-end rate the CPU engines alone would have had, from their bridge: the run's
/// set-up (until the stages started) plus every sample at the rate the CPU lane went while it
/// worked alone (its frames at the join, at the run's samples per frame). None when it
/// finished no frame.
fn cpu_alone_rate(bridge: Bridge, run: &RunFigures) -> Option<f64> {
    if bridge.cpu_frames == 0 || run.frames == 0 {
        return None;
    }
    let set_up = bridge.stages_started.saturating_duration_since(run.started);
    let alone = bridge
        .joined
        .saturating_duration_since(bridge.stages_started);
    let bridge_samples = bridge.cpu_frames as f64 * run.samples / run.frames as f64;
    let rate_alone = bridge_samples / alone.as_secs_f64();
    Some(run.samples / (set_up.as_secs_f64() + run.samples / rate_alone))
}

fn usable(rate: f64) -> bool {
    rate.is_finite() && rate > 0.0
}

/// Adds a figure, keeping the last `TRIALS`.
fn keep_last(figures: &mut Vec<f64>, figure: f64) {
    figures.push(figure);
    if figures.len() > TRIALS {
        figures.remove(0);
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

    fn record(figures: [&[f64]; 3]) -> RouteRecord {
        RouteRecord {
            cpu_only: figures[0].to_vec(),
            gpu_only: figures[1].to_vec(),
            with_gpu: figures[2].to_vec(),
            cpu_bridge: Vec::new(),
            runs: 0,
            device_joined: true,
        }
    }

    #[test]
    fn a_new_job_runs_the_gpu_alone_and_a_far_slower_cpu_is_never_tried() {
        let mut r = RouteRecord::default();
        assert_eq!(r.choose(), AutoRoute::GpuOnly);
        r.add(AutoRoute::GpuOnly, 30.0);
        keep_last(&mut r.cpu_bridge, 10.0);
        for _ in 0..2 * RETRY_EVERY {
            assert_eq!(
                r.choose(),
                AutoRoute::GpuOnly,
                "no trial costing more than 10 %"
            );
            r.add(AutoRoute::GpuOnly, 30.0);
        }
        assert!(r.cpu_only.is_empty() && r.with_gpu.is_empty());
    }

    #[test]
    fn a_cpu_bridge_close_to_the_gpu_gets_real_trials_and_both_lanes_too() {
        let mut r = record([&[], &[30.0], &[]]);
        r.cpu_bridge = vec![20.0];
        assert_eq!(
            r.choose(),
            AutoRoute::GpuOnly,
            "a bridge 33 % behind: no trial"
        );
        r.cpu_bridge = vec![25.0];
        assert_eq!(
            r.choose(),
            AutoRoute::CpuOnly,
            "a bridge within 25 % gets one"
        );
        // the CPU alone is faster than its bridge said (no device start-up beside it)
        r.add(AutoRoute::CpuOnly, 40.0);
        assert_eq!(
            r.choose(),
            AutoRoute::CpuOnly,
            "30 is not within 10 % of 40: the GPU and both lanes are out"
        );
        // about even: both lanes get a trial
        let mut r = record([&[31.0], &[30.0, 30.0, 30.0], &[]]);
        r.cpu_only.extend([31.0, 31.0]);
        assert_eq!(r.choose(), AutoRoute::WithGpu);
        r.add(AutoRoute::WithGpu, 20.0);
        assert_eq!(r.choose(), AutoRoute::CpuOnly, "both lanes lost: out");
    }

    #[test]
    fn both_lanes_get_no_trial_until_a_device_has_joined_a_run() {
        // the GPU alone whose device never joined: its run was the CPU engines' (bridge = rate)
        let mut r = RouteRecord::default();
        r.note(AutoRoute::GpuOnly, 30.0, Some(30.0), false);
        assert_eq!(
            r.choose(),
            AutoRoute::CpuOnly,
            "the CPU alone gets its trial"
        );
        r.add(AutoRoute::CpuOnly, 31.0);
        for _ in 0..2 * RETRY_EVERY {
            let way = r.choose();
            assert_ne!(
                way,
                AutoRoute::WithGpu,
                "no device joined: no trial of both"
            );
            r.add(way, 30.5);
        }
        // once a device has joined a run of the GPU alone, even ways get their trial of both
        r.note(AutoRoute::GpuOnly, 30.5, Some(30.0), true);
        assert_eq!(r.choose(), AutoRoute::WithGpu);
        // a record kept before this field was reads as joined: its trials go on as they did
        let old: RouteRecord = serde_json::from_str(r#"{"gpu_only": [30.0]}"#).expect("record");
        assert!(old.device_joined);
    }

    #[test]
    fn a_bridge_is_kept_only_from_runs_of_the_gpu_alone() {
        let mut r = RouteRecord::default();
        r.note(AutoRoute::CpuOnly, 5.0, Some(4.0), false);
        r.note(AutoRoute::GpuOnly, 9.0, Some(3.0), true);
        r.note(AutoRoute::GpuOnly, 8.0, Some(f64::NAN), true);
        r.note(AutoRoute::WithGpu, 7.0, Some(2.0), true);
        assert_eq!((r.cpu_only, r.gpu_only), (vec![5.0], vec![9.0, 8.0]));
        assert_eq!(r.cpu_bridge, vec![3.0]);
    }

    #[test]
    fn close_ways_get_several_trials_and_the_best_figure_counts() {
        // one noisy trial of the GPU alone (busy machine): 28 against 30 with both lanes
        let r = record([&[10.0], &[28.0], &[30.0]]);
        assert_eq!(
            r.choose(),
            AutoRoute::WithGpu,
            "both close: the better one first"
        );
        let r = record([&[10.0], &[28.0], &[30.0, 29.0]]);
        assert_eq!(r.choose(), AutoRoute::GpuOnly, "the fewest trials first");
        // its second trial is the faster: its best figure counts, not a mean
        let mut r = record([&[10.0], &[28.0, 36.0], &[34.0, 29.0]]);
        assert_eq!(
            r.choose(),
            AutoRoute::GpuOnly,
            "34 is within 10 % of 36: more trials"
        );
        r.gpu_only.push(35.0);
        assert_eq!(
            r.choose(),
            AutoRoute::WithGpu,
            "each close way up to TRIALS figures"
        );
        r.with_gpu.push(30.5);
        assert_eq!(r.choose(), AutoRoute::GpuOnly, "all trials done: the best");
        r.runs = RETRY_EVERY - 1;
        assert_eq!(
            r.choose(),
            AutoRoute::WithGpu,
            "the close runner-up, now and then"
        );
        // a way more than 10 % behind is not tried again, even with one figure
        let r = record([&[10.0], &[36.0, 36.0, 36.0], &[30.0]]);
        assert_eq!(r.choose(), AutoRoute::GpuOnly);
    }

    #[test]
    fn old_figures_leave_and_a_slowed_way_is_overtaken() {
        let mut r = record([&[20.0, 20.0, 20.0], &[30.0, 30.0, 30.0], &[5.0]]);
        assert_eq!(r.choose(), AutoRoute::GpuOnly);
        // the GPU is shared with another job now: its figures fall below the CPU's
        for _ in 0..TRIALS {
            r.add(AutoRoute::GpuOnly, 15.0);
        }
        assert_eq!(r.gpu_only.len(), TRIALS);
        assert_eq!(r.choose(), AutoRoute::CpuOnly);
    }

    #[test]
    fn shares_follow_the_rates_of_each_way_alone() {
        assert_eq!(record([&[10.0], &[], &[]]).shares(), None);
        assert_eq!(
            record([&[10.0, 12.0], &[30.0, 20.0], &[1.0]]).shares(),
            Some((12.0, 30.0))
        );
    }
}
