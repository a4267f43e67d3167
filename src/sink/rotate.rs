//! `--rotate DURATION|SIZE` and SIGHUP: when an output's file ends and the next begins.
//!
//! Every file output written in order (not stdout, a FIFO or a placed file) has a `Rotation`.
//! `output::Outputs` asks it, row by row, whether the row starts a new file:
//! - the output's first row, and the first row after a SIGHUP closed every file, do;
//! - `--rotate DURATION` (`30s`, `10min`, `1h`, `1d`): a row whose time falls in another period
//!   than the file's first row does. Periods are whole multiples of DURATION since 1970 (UTC), so
//!   `1h` files hold clock hours. A row's time is the run's start plus the row's time for file
//!   inputs, the wall clock when it is written for live ones (microphone, stdin, rtl_tcp).
//! - `--rotate SIZE` (`500MB`, `64KiB`, `1GB`; bytes): a row that would take the file past SIZE
//!   does, unless it is the file's first (so a file holds at least one row).
//!
//! The old file is completed first (npy header with its row count, PNG drawn), the new one gets
//! its own header: each file is whole and valid, and every row lands in exactly one file. With
//! `--rotate` the output path is a pattern (`rotate_names`); without it a SIGHUP reopens the same
//! path (logrotate moved the old file away). A name this run already wrote, still there, gets
//! `-{seq}` before its extension rather than being overwritten; with `--rotate`, so does a name
//! an earlier run wrote (or the pattern's next number is taken, where its names are numbered).

use super::destination::Destination;
use super::rotate_names::NamePattern;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Names of this run's files remembered (so a later file does not overwrite one): the last
/// this many, as 8-byte hashes, so a run of months stays within ~1.5 MB (at one file a minute,
/// the last 45 days' names).
pub(crate) const NAMES_KEPT: usize = 65_536;

/// Names tried after one that is taken (`Rotation::free_path`) before the file is refused.
const FREE_NAME_TRIES: u64 = 100_000;

/// The names of the last `NAMES_KEPT` files a run wrote (hashed; a collision only makes a name
/// get `-{seq}` where the file is there).
#[derive(Default)]
pub(crate) struct WrittenNames {
    set: HashSet<u64>,
    order: VecDeque<u64>,
}

impl WrittenNames {
    fn key(path: &Path) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        path.hash(&mut h);
        h.finish()
    }

    pub(crate) fn insert(&mut self, path: &Path) {
        let key = Self::key(path);
        if self.set.insert(key) {
            self.order.push_back(key);
            if self.order.len() > NAMES_KEPT {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }

    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.set.contains(&Self::key(path))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }
}

/// `--rotate`: how long or how large each file may get.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RotateSpec {
    /// A new file each period of this many seconds (> 0).
    Every(f64),
    /// A file grows to at most this many bytes (> 0).
    Size(u64),
}

/// A `--rotate` value that is neither a duration nor a size.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("'{0}': expected a duration (30s, 10min, 1h, 1d) or a size (500MB, 64KiB, 1GB) above 0 and below 16 EiB")]
pub struct RotateError(pub String);

/// Size units (SI and binary), longest suffix first, in bytes.
const SIZE_UNITS: [(&str, u64); 9] = [
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("kB", 1000),
    ("KB", 1000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];

/// Parses `--rotate`.
pub(crate) fn parse_rotate(text: &str) -> Result<RotateSpec, RotateError> {
    let bad = || RotateError(text.to_string());
    let t = text.trim();
    if let Some((number, unit)) = SIZE_UNITS
        .iter()
        .chain(&[("B", 1)])
        .find_map(|(u, b)| t.strip_suffix(u).map(|n| (n, *b)))
    {
        let value: f64 = number.trim().parse().map_err(|_| bad())?;
        let bytes = value * unit as f64;
        // (past 2^64 - 1 bytes `as u64` would saturate: a size no file reaches, said as such)
        return match bytes.is_finite() && (1.0..u64::MAX as f64).contains(&bytes) {
            true => Ok(RotateSpec::Size(bytes as u64)),
            false => Err(bad()),
        };
    }
    match crate::types::duration::seconds(t, false) {
        Some(s) if s > 0.0 => Ok(RotateSpec::Every(s)),
        _ => Err(bad()),
    }
}

impl std::str::FromStr for RotateSpec {
    type Err = RotateError;
    fn from_str(s: &str) -> Result<Self, RotateError> {
        parse_rotate(s)
    }
}

/// Whether `--output PATH` names a file (not stdout's `-`, not a `nats://` subject): what
/// `--rotate` can split.
pub(crate) fn is_output_file(path: &Path) -> bool {
    path.as_os_str() != "-" && !path.to_string_lossy().contains("://")
}

/// Checks `--rotate` against the outputs: it needs files (`--output FILE` or `--output-dir`)
/// whose name patterns are valid. The message is a usage error's.
pub(crate) fn check_rotate(
    spec: Option<RotateSpec>,
    output: Option<&Path>,
    output_dir: Option<&Path>,
) -> Result<(), String> {
    if spec.is_none() {
        return Ok(());
    }
    let path = match (output, output_dir) {
        (Some(p), _) if is_output_file(p) => {
            not_a_folder(p)?;
            p.to_path_buf()
        }
        // (each stream's file is named in the folder, whose own name may hold fields)
        (_, Some(dir)) => dir.join("stream.csv"),
        _ => {
            return Err(
                "--rotate splits output files: give --output FILE or --output-dir DIR (not stdout or NATS)"
                    .into(),
            )
        }
    };
    if super::opening::is_stream_path(&path) {
        // (an --output-dir's stream files are new names: only --output can be such a path)
        return Err(format!(
            "--output {}: a FIFO, a device or stdout cannot be split into files by --rotate",
            crate::types::shown_path(&path)
        ));
    }
    NamePattern::new(&path)
        .map(drop)
        .map_err(|e| format!("--rotate: {e}"))
}

/// `--output PATH --rotate`: a folder (one that exists, or a path ending in a separator) has
/// no file name to number, and the files would go beside it.
fn not_a_folder(path: &Path) -> Result<(), String> {
    let text = path.to_string_lossy();
    if !(text.ends_with('/') || text.ends_with(std::path::MAIN_SEPARATOR) || path.is_dir()) {
        return Ok(());
    }
    Err(format!(
        "--rotate: --output {text} names a folder: give a file-name pattern in it (such as {}) or --output-dir {text}",
        crate::types::shown_path(&path.join("spec.csv"))
    ))
}

/// Where a row's time on the calendar comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum RowClock {
    /// The run started at this time (seconds since 1970); a row is that plus its own time.
    RunStart(f64),
    /// The wall clock when the row is written (live inputs).
    Wall,
}

/// Seconds since 1970 now.
pub(crate) fn now_epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Makes the destination of a new file (a file, or a PNG image of the output's stream).
pub(crate) type MakeDestination = Arc<dyn Fn(&Path) -> Destination + Send + Sync>;

/// The rotation options of a run (plain values, built where the run is wired).
#[derive(Clone)]
pub(crate) struct RotateOptions {
    pub spec: Option<RotateSpec>,
    pub clock: RowClock,
    /// The run's inputs and other outputs: a file name the pattern makes that is one of them
    /// is refused.
    pub guarded: super::overwrite_guard::GuardedFiles,
}

/// One output's files: which one is open, and when the next begins.
pub(crate) struct Rotation {
    /// `--rotate`'s pattern; None: the path itself, reopened after a SIGHUP.
    pattern: Option<NamePattern>,
    path: PathBuf,
    spec: Option<RotateSpec>,
    pub clock: RowClock,
    make: MakeDestination,
    /// Files begun so far.
    seq: u64,
    /// Whether a file is begun and takes rows.
    open: bool,
    /// The open file's period (`Every`), its bytes and rows so far.
    period: i64,
    pub bytes: u64,
    pub rows: u64,
    /// Files this run wrote (never overwritten by a later one): the last `NAMES_KEPT`.
    written: WrittenNames,
    /// `RotateOptions::guarded`.
    guarded: super::overwrite_guard::GuardedFiles,
    /// Whether a name found taken was said (a warning once a run).
    said_taken: bool,
}

impl Rotation {
    /// The rotation of the output at `path`. With a `--rotate` spec the path is a pattern.
    pub(crate) fn new(path: &Path, options: &RotateOptions, make: MakeDestination) -> Self {
        let pattern = options.spec.and_then(|_| NamePattern::new(path).ok()); // checked in config
        Rotation {
            pattern,
            path: path.to_path_buf(),
            spec: options.spec,
            clock: options.clock,
            make,
            seq: 0,
            open: false,
            period: 0,
            bytes: 0,
            rows: 0,
            written: WrittenNames::default(),
            guarded: options.guarded.clone(),
            said_taken: false,
        }
    }

    /// An output whose first file was opened before the run (a single `--output` without
    /// `--rotate`): it counts as begun.
    pub(crate) fn begun(mut self) -> Self {
        self.open = true;
        self.seq = 1;
        self.written.insert(&self.path);
        self
    }

    /// Whether a row of `len` bytes at `epoch_s` must begin a new file.
    pub(crate) fn starts_file(&self, epoch_s: f64, len: u64) -> bool {
        if !self.open {
            return true;
        }
        match self.spec {
            Some(RotateSpec::Every(d)) => period(epoch_s, d) != self.period,
            Some(RotateSpec::Size(limit)) => self.rows > 0 && self.bytes + len > limit,
            None => false,
        }
    }

    /// Whether rows split at row boundaries (`--rotate`), not only between writes (SIGHUP).
    pub(crate) fn splits_rows(&self) -> bool {
        self.spec.is_some()
    }

    /// Begins the next file, whose first row is at `epoch_s` and whose header takes `header`
    /// bytes: its destination (folders created).
    pub(crate) fn begin(&mut self, epoch_s: f64, header: u64) -> std::io::Result<Destination> {
        let path = match &self.pattern {
            Some(pattern) => pattern.render(epoch_s, self.seq),
            None => self.path.clone(),
        };
        let path = self.free_path(epoch_s, path)?;
        if let Some(input) = self.guarded.input_at(&path) {
            return Err(std::io::Error::other(format!(
                "--output {} makes {}, which is also an input ({input}): refusing to overwrite it",
                crate::types::shown_path(&self.path),
                crate::types::shown_path(&path)
            )));
        }
        if let Some(output) = self.guarded.output_at(&path) {
            return Err(std::io::Error::other(format!(
                "--output {} makes {}, which is also {output}: each output needs its own file",
                crate::types::shown_path(&self.path),
                crate::types::shown_path(&path)
            )));
        }
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder)?;
        }
        self.written.insert(&path);
        self.seq += 1;
        self.open = true;
        if let Some(RotateSpec::Every(d)) = self.spec {
            self.period = period(epoch_s, d);
        }
        self.bytes = header;
        self.rows = 0;
        tracing::debug!(file = %crate::types::shown_path(&path), "output file begun");
        Ok((self.make)(&path))
    }

    /// `path`, or, where a file is there that must not be overwritten, the first free name
    /// after it: the pattern's next number where its names hold one, else `path` with
    /// `-{seq}` before its extension. With `--rotate` no file there is overwritten (an earlier
    /// run's, in the same hour or numbered alike); without it, only a file this run wrote
    /// (a SIGHUP's reopen where the old file was not moved away).
    fn free_path(&mut self, epoch_s: f64, path: PathBuf) -> std::io::Result<PathBuf> {
        let guarded =
            |p: &Path| self.guarded.input_at(p).is_some() || self.guarded.output_at(p).is_some();
        let kept = self.pattern.is_some() || self.written.contains(&path);
        if !(kept && path.exists()) || guarded(&path) {
            return Ok(path); // (an input's or another output's name is refused by `begin`)
        }
        let numbered = self.pattern.as_ref().filter(|p| p.numbered());
        for n in self.seq..self.seq + FREE_NAME_TRIES {
            let candidate = match numbered {
                Some(pattern) => pattern.render(epoch_s, n),
                None => crate::sink::rotate_names::numbered(&path, n),
            };
            if candidate.exists() || guarded(&candidate) {
                continue;
            }
            if numbered.is_some() {
                self.seq = n; // (the numbers go on from here)
            }
            match std::mem::replace(&mut self.said_taken, true) {
                false => {
                    tracing::warn!(taken = %crate::types::shown_path(&path), file = %crate::types::shown_path(&candidate), "an output file of that name is there already: writing another (said once a run)")
                }
                true => {
                    tracing::debug!(taken = %crate::types::shown_path(&path), file = %crate::types::shown_path(&candidate), "output name taken")
                }
            }
            return Ok(candidate);
        }
        Err(std::io::Error::other(format!(
            "--output {}: {} and the next {FREE_NAME_TRIES} names after it are taken",
            crate::types::shown_path(&self.path),
            crate::types::shown_path(&path)
        )))
    }

    /// The open file ended (SIGHUP): the next row begins another.
    pub(crate) fn close(&mut self) {
        self.open = false;
    }

    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// Whether no file was begun yet.
    pub(crate) fn never_begun(&self) -> bool {
        self.seq == 0
    }
}

/// The period `epoch_s` falls in, for periods of `d` seconds since 1970.
fn period(epoch_s: f64, d: f64) -> i64 {
    (epoch_s / d).floor() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_remembered_are_bounded() {
        let mut names = WrittenNames::default();
        let name = |k: usize| PathBuf::from(format!("/data/spec-{k:06}.npy"));
        for k in 0..NAMES_KEPT + 10 {
            names.insert(&name(k));
            names.insert(&name(k)); // twice: kept once
        }
        assert_eq!(names.len(), NAMES_KEPT);
        assert_eq!(names.set.len(), NAMES_KEPT);
        assert!(!names.contains(&name(9)), "the oldest go first");
        assert!(names.contains(&name(10)) && names.contains(&name(NAMES_KEPT + 9)));
    }

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(parse_rotate("1h"), Ok(RotateSpec::Every(3600.0)));
        assert_eq!(parse_rotate("10min"), Ok(RotateSpec::Every(600.0)));
        assert_eq!(parse_rotate("1.5s"), Ok(RotateSpec::Every(1.5)));
        assert_eq!(parse_rotate("500MB"), Ok(RotateSpec::Size(500_000_000)));
        assert_eq!(parse_rotate("64KiB"), Ok(RotateSpec::Size(65_536)));
        assert_eq!(parse_rotate("4096B"), Ok(RotateSpec::Size(4096)));
        // 2^64 bytes had saturated to 2^64 - 1 (session 48's audit)
        for bad in ["", "1", "0s", "-1h", "MB", "1 parsec", "nanh", "0B"]
            .into_iter()
            .chain([
                "18446744073709551616B",
                "99999999999999999999999B",
                "1e300TB",
            ])
        {
            assert!(parse_rotate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_file_begins_at_each_period_or_size() {
        let make: MakeDestination = Arc::new(Destination::file);
        let options = RotateOptions {
            spec: Some(RotateSpec::Every(60.0)),
            clock: RowClock::Wall,
            guarded: Default::default(),
        };
        let dir = tempfile::tempdir().unwrap();
        let mut r = Rotation::new(&dir.path().join("a-%H%M.csv"), &options, make.clone());
        assert!(r.starts_file(119.0, 1));
        let d = r.begin(119.0, 0).unwrap();
        assert!(d.describe().ends_with("a-0001.csv"), "{}", d.describe());
        assert!(!r.starts_file(119.9, 1));
        assert!(r.starts_file(120.0, 1));
        let options = RotateOptions {
            spec: Some(RotateSpec::Size(100)),
            clock: RowClock::Wall,
            guarded: Default::default(),
        };
        let mut r = Rotation::new(&dir.path().join("b.npy"), &options, make);
        r.begin(0.0, 128).unwrap();
        assert!(!r.starts_file(0.0, 500), "a file's first row always fits");
        r.rows = 1;
        assert!(r.starts_file(0.0, 1));
    }
}
