//! Placed outputs: when every row of an output has one size (`--format f32|npy`) and its row
//! count is known before the run (one range-read stream per file), the file is created at its
//! final size, its space reserved with fallocate(2), and mapped into memory; the encode threads
//! then write each row straight to its place (header + frame × row bytes), several at once, and
//! the sink only counts rows. At the end the header gets the real count, and a run cut short
//! (SIGINT, an error) is truncated to the rows the sink accounted in order, so the file is what the
//! sequential writer would have left.
//!
//! The rows are written into a part file beside the output (`.NAME.fftd-PID.part`), renamed
//! over it when the sink finishes: until then the output's path is as it was, so a run that
//! fails before its first row (a bad first value) leaves an earlier run's file whole, as the
//! ordinary writer does (`sink::output`). A run ended at once by a second signal removes the
//! part file (`types::RemovedAtExit`); one killed (SIGKILL) leaves it, not a file of zeros under
//! the output's name, and the next run writing that output removes it. A symlink is followed
//! (the part is made beside its target); a file of several hard links (which a rename would
//! split), one owned by another user or group (a rename would make it ours), or one mounted in
//! place goes the ordinary way; a rename refused all the same is done as a copy.
//!
//! Why: one thread writing into a tmpfs file (page allocation and copy under the file's lock) was
//! the limit of file output; reserved pages written through a mapping take parallel faults.
//! Each row is claimed once (an atomic bit per row), so no two threads ever write the same bytes.
//! Reserving the space first turns a full disk into an error before the run (the output then goes
//! the ordinary way), never a fault during it. Like any mapped writer, a file shrunk by another
//! process during the run would fault.
//!
//! `FFTD_PLACED_OUTPUT=0` turns placed outputs off (for comparisons and benchmarks).

use memmap2::{MmapOptions, MmapRaw};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Outputs smaller than this go the ordinary way (a mapping is not worth it).
pub(crate) const MIN_PLACED_BYTES: u64 = 1 << 20;

/// Whether placed outputs may be used (`FFTD_PLACED_OUTPUT=0` says no).
pub(crate) fn enabled() -> bool {
    crate::knobs::placed_output()
}

/// The file the rows go into, beside the output it becomes (`finish` renames it over `target`);
/// removed when dropped before that.
struct PartFile {
    file: File,
    path: PathBuf,
    target: PathBuf,
    renamed: AtomicBool,
    /// Removes the part file if the process ends at once (a second Ctrl-C).
    at_exit: crate::types::RemovedAtExit,
}

impl PartFile {
    /// A new part file for the output `path`, with its permissions when there is one. Err for
    /// anything but a regular file of one link (or none yet), or a folder that takes no new file.
    fn beside(path: &Path) -> io::Result<Self> {
        let target = match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => return Err(io::Error::other("not a regular file")),
            Ok(m) if m.nlink() > 1 => return Err(io::Error::other("a file of several links")),
            Ok(m) => replaceable(path, &m)?,
            Err(_) if path.is_symlink() => return Err(io::Error::other("a dangling link")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => path.to_path_buf(),
            Err(e) => return Err(e),
        };
        let name = target
            .file_name()
            .ok_or_else(|| io::Error::other("no file name"))?;
        let part_name = format!("{}{}{PART_SUFFIX}", part_prefix(name), std::process::id());
        let part = target.with_file_name(part_name);
        remove_dead_runs_parts(&target);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&part)?;
        let part = PartFile {
            file,
            at_exit: crate::types::RemovedAtExit::new(&part),
            path: part,
            target,
            renamed: AtomicBool::new(false),
        };
        if let Ok(m) = std::fs::metadata(&part.target) {
            part.file.set_permissions(m.permissions())?;
        }
        Ok(part)
    }

    /// Puts the part file in the output's place: renamed over it, or, where the rename is
    /// refused (a file bind-mounted in place, a folder that will not take it), its bytes copied
    /// into the output, so the rows are never lost at the last step.
    fn rename(&self) -> io::Result<()> {
        if std::fs::rename(&self.path, &self.target).is_err() {
            let mut output = OpenOptions::new()
                .write(true)
                .truncate(true)
                .create(true)
                .open(&self.target)?;
            let mut part = &self.file;
            io::Seek::seek(&mut part, io::SeekFrom::Start(0))?;
            io::copy(&mut part, &mut output)?;
            output.sync_data()?; // (a full disk's error comes here, not at close)
            std::fs::remove_file(&self.path)?;
        }
        self.renamed.store(true, Ordering::Release);
        self.at_exit.keep();
        Ok(())
    }
}

/// The part files of an output named `name`: `.NAME.fftd-PID.part`.
fn part_prefix(name: &std::ffi::OsStr) -> String {
    format!(".{}.fftd-", name.to_string_lossy())
}
const PART_SUFFIX: &str = ".part";

/// The output `path` (`m`, its metadata) resolved, if a part file renamed over it would become
/// it: an error where the rename would change what owns it or could be refused, as for an output
/// bind-mounted in place (its device is not its folder's) or one owned by another user or
/// group (the rename would give it ours; a sticky folder refuses it): those go the ordinary
/// way, written in place.
fn replaceable(path: &Path, m: &std::fs::Metadata) -> io::Result<PathBuf> {
    let target = std::fs::canonicalize(path)?;
    let folder = target.parent().map(std::fs::metadata).transpose()?;
    if folder.is_some_and(|f| f.dev() != m.dev()) {
        return Err(io::Error::other("a file mounted in place"));
    }
    // SAFETY: geteuid(2) and getegid(2) take nothing and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if m.uid() != uid || m.gid() != gid {
        return Err(io::Error::other("a file owned by another user or group"));
    }
    Ok(target)
}

/// Removes the part files of `target` that runs killed at once left (SIGKILL, a power cut):
/// `.NAME.fftd-PID.part` whose process is gone.
fn remove_dead_runs_parts(target: &Path) {
    let (Some(folder), Some(name)) = (target.parent(), target.file_name()) else {
        return;
    };
    let prefix = part_prefix(name);
    let folder = if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    };
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let pid = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(PART_SUFFIX));
        let dead = pid
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
        if dead {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl Drop for PartFile {
    fn drop(&mut self) {
        if !self.renamed.load(Ordering::Acquire) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// One mapped output file.
pub(crate) struct PlacedFile {
    part: PartFile,
    map: MmapRaw,
    /// Bytes before the first row (the format's preamble).
    header: usize,
    row_bytes: usize,
    rows: u64,
    /// One bit per row: set when a thread has claimed the row.
    claimed: Vec<AtomicU64>,
}

/// What a placed output is planned to hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlacedShape {
    pub header: usize,
    pub row_bytes: usize,
    pub rows: u64,
}

impl PlacedShape {
    pub(crate) fn total_bytes(&self) -> u64 {
        self.header as u64 + self.row_bytes as u64 * self.rows
    }
}

impl PlacedFile {
    /// Creates the part file of `path` at `shape`'s size with its space reserved and maps it,
    /// writing `preamble` at its start; `path` itself is left as it is until `finish`. Fails
    /// (and the caller falls back to ordinary writes) for anything `PartFile::beside` refuses or
    /// a filesystem that cannot reserve the space.
    pub(crate) fn create(path: &Path, shape: PlacedShape, preamble: &[u8]) -> io::Result<Self> {
        let part = PartFile::beside(path)?;
        let total = shape.total_bytes();
        reserve(&part.file, total)?;
        let map = MmapOptions::new().len(total as usize).map_raw(&part.file)?;
        part.file.write_all_at(preamble, 0)?;
        let words = shape.rows.div_ceil(64) as usize;
        Ok(PlacedFile {
            part,
            map,
            header: shape.header,
            row_bytes: shape.row_bytes,
            rows: shape.rows,
            claimed: (0..words).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Lets `fill` write row `row`'s bytes in place. Err when the row is outside the planned
    /// rows or was written before (both would be an error in the pipeline, never user input).
    pub(crate) fn write_row(&self, row: u64, fill: impl FnOnce(&mut [u8])) -> Result<(), String> {
        if row >= self.rows {
            return Err(format!("row {row} past the {} planned", self.rows));
        }
        let bit = 1u64 << (row % 64);
        let word = &self.claimed[(row / 64) as usize];
        if word.fetch_or(bit, Ordering::AcqRel) & bit != 0 {
            return Err(format!("row {row} written twice"));
        }
        let start = self.header + row as usize * self.row_bytes;
        // SAFETY: `start + row_bytes <= header + rows * row_bytes`, the mapping's length (row <
        // rows, checked above); the mapping lives as long as `self`; and the row's bit was unset
        // and is now set by this call alone (fetch_or), so no other slice of these bytes exists
        // or will be made: this is the only reference to them.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(start), self.row_bytes)
        };
        fill(bytes);
        Ok(())
    }

    /// Completes the file: `final_header` (if any) at its start, the file cut to the `rows`
    /// rows written in order when there are fewer than planned, and put in the output's place.
    /// Only once every writer is done (the sink calls it after the encode threads have ended):
    /// a row written into a part cut away would fault. A file never finished (the run failed
    /// before its first row) is removed with its `PlacedFile`, the output's path untouched.
    pub(crate) fn finish(&self, rows: u64, final_header: Option<&[u8]>) -> io::Result<()> {
        if let Some(header) = final_header {
            self.part.file.write_all_at(header, 0)?;
        }
        if rows < self.rows {
            let len = self.header as u64 + rows * self.row_bytes as u64;
            self.part.file.set_len(len)?;
        }
        self.part.rename()
    }
}

/// Reserves `len` bytes of `file` on its filesystem (allocates the blocks; sets its size).
fn reserve(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::other("output too large"))?;
    // SAFETY: fallocate(2) on a descriptor this function borrows open for writing; it reads no
    // memory of ours.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The placed file of each output (None: written the ordinary way), shared by the encode threads
/// (which write rows) and the sink (which finishes them).
#[derive(Default)]
pub(crate) struct PlacedOutputs {
    files: Vec<Option<PlacedFile>>,
}

impl PlacedOutputs {
    pub(crate) fn new(files: Vec<Option<PlacedFile>>) -> Self {
        PlacedOutputs { files }
    }

    /// Output `i`'s placed file, if it has one.
    pub(crate) fn get(&self, i: usize) -> Option<&PlacedFile> {
        self.files.get(i).and_then(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rows: u64) -> PlacedShape {
        PlacedShape {
            header: 4,
            row_bytes: 8,
            rows,
        }
    }

    #[test]
    fn rows_land_in_place_in_any_order_and_a_short_run_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.bin");
        let file = PlacedFile::create(&path, shape(5), b"HEAD").unwrap();
        for row in [3u64, 0, 1, 4, 2] {
            file.write_row(row, |b| b.fill(row as u8 + 1)).unwrap();
        }
        file.finish(3, Some(b"DONE")).unwrap();
        drop(file);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..4], b"DONE");
        assert_eq!(bytes.len(), 4 + 3 * 8);
        for row in 0..3 {
            assert!(bytes[4 + row * 8..4 + (row + 1) * 8]
                .iter()
                .all(|&b| b == row as u8 + 1));
        }
    }

    #[test]
    fn a_row_is_written_once_and_only_within_the_plan() {
        let dir = tempfile::tempdir().unwrap();
        let file = PlacedFile::create(&dir.path().join("o.bin"), shape(2), b"HEAD").unwrap();
        file.write_row(1, |_| {}).unwrap();
        assert!(file.write_row(1, |_| {}).unwrap_err().contains("twice"));
        assert!(file.write_row(2, |_| {}).unwrap_err().contains("past"));
    }

    #[test]
    fn devices_are_not_placed() {
        let shape = shape(1);
        assert!(PlacedFile::create(Path::new("/dev/null"), shape, b"HEAD").is_err());
    }
}
