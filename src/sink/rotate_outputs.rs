//! The rotating side of `output::Outputs`: rows of an output with a `rotate::Rotation` are
//! split where a new file must begin (`--rotate`), the old file completed (npy header with its
//! row count, PNG drawn, buffers flushed and closed) before the new one gets its header; a
//! SIGHUP (`reopen`) completes every file, and the next rows of each output begin a new one.
//!
//! Rows split at row boundaries only with `--rotate`, which marks every row's bytes
//! (`Rows::marks`); a SIGHUP alone ends files between writes.

use super::destination::Destination;
use super::output::{Output, Outputs, Rows};
use super::placed::PlacedOutputs;
use super::png::ImageFile;
use super::rotate::{now_epoch, MakeDestination, RotateOptions, Rotation, RowClock};
use super::Sample;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

impl<T: Sample> Outputs<'_, T> {
    /// Gives the outputs their rotations (one per output, None: left alone) and the SIGHUP flag.
    pub(crate) fn rotate(&mut self, rotations: Vec<Option<Rotation>>, reopen: Arc<AtomicBool>) {
        self.rotations = rotations;
        self.reopen = Some(reopen);
    }

    /// After a SIGHUP: completes every rotated output's file; the next rows begin new ones.
    pub(crate) fn reopen_if_asked(&mut self) -> io::Result<()> {
        let asked = self
            .reopen
            .as_ref()
            .is_some_and(|flag| flag.swap(false, Ordering::Relaxed));
        if !asked {
            return Ok(());
        }
        let (mut first_error, mut completed) = (Ok(()), 0);
        for i in 0..self.outputs.len() {
            let open = self.rotations.get(i).and_then(Option::as_ref);
            if open.is_some_and(Rotation::is_open) && !self.rowless_in_place(i) {
                let done = self.finish_one(i);
                if let Some(r) = self.rotations[i].as_mut() {
                    r.close();
                }
                completed += 1;
                if first_error.is_ok() {
                    first_error = done;
                }
            }
        }
        // (stdout, FIFOs, devices and placed files are left as they are: `rotations`)
        tracing::info!(
            "SIGHUP: {completed} output file(s) completed, the next rows begin new ones; stdout, FIFOs, devices and placed files go on as they were"
        );
        first_error
    }

    /// Whether output `i`'s open file has no row yet and is still at its path: a SIGHUP has
    /// nothing to complete there (it would leave an empty file and put the rows in another).
    fn rowless_in_place(&self, i: usize) -> bool {
        let out = &self.outputs[i];
        !out.started && out.dest.still_at_its_path()
    }

    /// Writes rows of a rotated output, beginning new files where its rotation says.
    pub(super) fn write_rotated(&mut self, i: usize, rows: &Rows<'_>) -> io::Result<()> {
        let Some(mut rotation) = self.rotations[i].take() else {
            return self.write_rows(i, rows);
        };
        let written = self.split_rows(i, rows, &mut rotation);
        self.rotations[i] = Some(rotation);
        written
    }

    fn split_rows(&mut self, i: usize, rows: &Rows<'_>, rotation: &mut Rotation) -> io::Result<()> {
        let wall = now_epoch();
        let clock = rotation.clock;
        let time_of = |k: usize| match clock {
            RowClock::RunStart(start) => start + rows.marks.get(k).map_or(0.0, |m| m.time_s),
            RowClock::Wall => wall,
        };
        let marked = rows.marks.len() as u64 == rows.count && !rows.marks.is_empty();
        if !rotation.splits_rows() || !marked {
            if rotation.starts_file(time_of(0), rows.bytes.len() as u64) {
                self.next_file(i, rows, rotation, time_of(0))?;
            }
            rotation.bytes += rows.bytes.len() as u64;
            rotation.rows += rows.count;
            return self.write_rows(i, rows);
        }
        let mut start = 0;
        for (k, mark) in rows.marks.iter().enumerate() {
            let len = mark.bytes.len() as u64;
            let t = time_of(k);
            if rotation.starts_file(t, len) {
                if k > start {
                    self.write_rows(i, &part(rows, start..k))?;
                }
                self.next_file(i, rows, rotation, t)?;
                start = k;
            }
            rotation.bytes += len;
            rotation.rows += 1;
        }
        self.write_rows(i, &part(rows, start..rows.marks.len()))
    }

    /// Completes output `i`'s file (if one is begun) and begins the next, whose first row is at
    /// `epoch_s`.
    fn next_file(
        &mut self,
        i: usize,
        rows: &Rows<'_>,
        rotation: &mut Rotation,
        epoch_s: f64,
    ) -> io::Result<()> {
        if rotation.is_open() {
            self.finish_one(i)?;
        }
        let header = self.encoder.preamble(rows.first, rows.n).len() as u64;
        let dest = rotation.begin(epoch_s, header)?;
        self.outputs[i] = Output::new(dest);
        Ok(())
    }

    /// For `finish_one`: true when output `i` has no file to complete (a SIGHUP closed it and no
    /// row came since). A rotated output that never got a row begins its first file now, so a
    /// run leaves one (as empty as its format allows).
    pub(super) fn finish_unbegun(&mut self, i: usize) -> io::Result<bool> {
        let Some(rotation) = self.rotations.get_mut(i).and_then(Option::as_mut) else {
            return Ok(false);
        };
        if rotation.is_open() {
            return Ok(false);
        }
        if !rotation.never_begun() {
            return Ok(true);
        }
        let epoch_s = match rotation.clock {
            RowClock::RunStart(start) => start,
            RowClock::Wall => now_epoch(),
        };
        let dest = rotation.begin(epoch_s, 0)?;
        self.outputs[i] = Output::new(dest);
        Ok(false)
    }
}

/// Rows `range` of `rows` (their marks keep the part's offsets: only their lengths are used).
fn part<'r>(rows: &Rows<'r>, range: std::ops::Range<usize>) -> Rows<'r> {
    let marks = &rows.marks[range.clone()];
    let bytes = match (marks.first(), marks.last()) {
        (Some(a), Some(b)) => &rows.bytes[a.bytes.start..b.bytes.end],
        _ => &rows.bytes[..0],
    };
    Rows {
        first: rows.first,
        n: rows.n,
        bins: rows.bins,
        count: marks.len() as u64,
        bytes,
        marks,
    }
}

/// One rotation per output that is a file written in order (not stdout, a FIFO or device, a
/// NATS subject, a placed file). `image_of(i)` makes output `i`'s PNG destinations.
pub(crate) fn rotations(
    dests: &[Destination],
    placed: &PlacedOutputs,
    options: &RotateOptions,
    image_of: &dyn Fn(usize) -> Option<MakeDestination>,
) -> Vec<Option<Rotation>> {
    let file: MakeDestination = Arc::new(Destination::file);
    dests
        .iter()
        .enumerate()
        .map(|(i, dest)| {
            let (path, begun, make) = match dest {
                Destination::File { path, created, .. } => (path.as_path(), *created, file.clone()),
                Destination::Image(image) => (image.path(), image.is_created(), image_of(i)?),
                _ => return None,
            };
            if placed.get(i).is_some() || super::opening::is_stream_path(path) {
                return None;
            }
            let rotation = Rotation::new(path, options, make);
            Some(match begun && options.spec.is_none() {
                true => rotation.begun(),
                false => rotation,
            })
        })
        .collect()
}

/// Makes the PNG image destinations of a stream's output.
pub(crate) fn image_maker(
    make: impl Fn(&std::path::Path) -> ImageFile + Send + Sync + 'static,
) -> MakeDestination {
    Arc::new(move |path| Destination::Image(Box::new(make(path))))
}
