//! The writer of every output (the sink stage owns it): takes rows already encoded into bytes,
//! adds what the format needs around them (the csv header before the first row, the npy header
//! and, at the end, its frame count), checks that an output's rows keep one width where the format
//! needs it, and writes to the output's destination.
//!
//! Files are opened when their first rows arrive and at most `max_open` are open at once: the
//! least recently written is flushed and closed to make room, and reopened for appending when
//! more rows come. So thousands of `--output-dir` files need a handful of descriptors, and only
//! the open ones hold a write buffer. `finish` creates the files of outputs that got no rows (as
//! empty as their format allows) so every planned file exists after a run.
//!
//! A placed output (`placed`) gets its rows from the encode threads directly: here its rows are
//! only counted, and `finish` completes its file.

use super::destination::Destination;
use super::placed::PlacedOutputs;
use super::{Encoder, Sample};
use crate::types::StreamMeta;
use std::collections::VecDeque;
use std::io::{self, Write};

/// Files open at once, at most.
pub(crate) const MAX_OPEN_FILES: usize = 64;

/// How many output files to keep open: `MAX_OPEN_FILES`, or a quarter of the process's open-file
/// limit when that is lower (the rest is for inputs, libraries, the OpenCL runtime).
pub(crate) fn open_files_budget() -> usize {
    let soft_limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse::<usize>().ok()
        });
    match soft_limit {
        Some(limit) => (limit / 4).clamp(1, MAX_OPEN_FILES),
        None => MAX_OPEN_FILES,
    }
}

/// The rows an output takes, known before any comes: its first stream, frame size and bins
/// per row (as `Rows` has them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowShape {
    pub stream: usize,
    pub n: usize,
    pub bins: usize,
}

/// Encoded rows of one output: consecutive frames, all of one width.
pub(crate) struct Rows<'a> {
    /// Stream of the first row (names the csv header's frequencies and any width error).
    pub first: &'a StreamMeta,
    /// Frame size of the rows.
    pub n: usize,
    /// Bins per row (values per row, or half of them with `--scale complex`).
    pub bins: usize,
    /// Number of rows.
    pub count: u64,
    pub bytes: &'a [u8],
    /// Each row, when the run sends rows as messages (`--output nats://`); else empty.
    pub marks: &'a [super::RowMark],
}

pub(super) struct Output {
    pub(super) dest: Destination,
    /// Whether the preamble has been written.
    pub(super) started: bool,
    /// Row width in bins, fixed by the first rows.
    pub(super) bins: Option<usize>,
    pub(super) frames: u64,
    /// Written to since the last flush.
    pub(super) dirty: bool,
    /// The preamble's bytes and each row's, once written (a file cut after a write error).
    pub(super) preamble_bytes: u64,
    pub(super) row_bytes: u64,
}

impl Output {
    /// A destination nothing was written to yet.
    pub(super) fn new(dest: Destination) -> Self {
        Output {
            dest,
            started: false,
            bins: None,
            frames: 0,
            dirty: false,
            preamble_bytes: 0,
            row_bytes: 0,
        }
    }
}

/// errno "too many open files" (Linux).
const EMFILE: i32 = 24;

pub(crate) struct Outputs<'a, T: Sample> {
    pub(super) encoder: &'a dyn Encoder<T>,
    pub(super) outputs: Vec<Output>,
    /// Open files, least recently written first.
    pub(super) open: VecDeque<usize>,
    max_open: usize,
    placed: &'a PlacedOutputs,
    /// Each output's files (`--rotate`, SIGHUP: `rotate_outputs`); empty: one file each.
    pub(super) rotations: Vec<Option<super::rotate::Rotation>>,
    /// Set by SIGHUP: every file is completed and the next rows begin new ones.
    pub(super) reopen: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Each output's rows as known before any came (`expect_shapes`), for one that gets none.
    shapes: Vec<Option<RowShape>>,
}

impl<'a, T: Sample> Outputs<'a, T> {
    /// Nothing is opened here (stdout needs no opening).
    pub(crate) fn new(
        encoder: &'a dyn Encoder<T>,
        dests: Vec<Destination>,
        max_open: usize,
        placed: &'a PlacedOutputs,
    ) -> Self {
        let outputs = dests.into_iter().map(Output::new).collect();
        Outputs {
            encoder,
            outputs,
            open: VecDeque::new(),
            max_open: max_open.max(1),
            placed,
            rotations: Vec::new(),
            reopen: None,
            shapes: Vec::new(),
        }
    }

    /// The shape of each output's rows, known before any comes: an output that gets none is
    /// still headed as its rows would be (the csv header; npy's shape (0, bins)).
    pub(crate) fn expect_shapes(&mut self, shapes: Vec<Option<RowShape>>) {
        self.shapes = shapes;
    }

    /// Name of output `i`'s destination, for messages.
    pub(crate) fn describe(&self, i: usize) -> String {
        self.outputs[i].dest.describe()
    }

    /// Makes output `i` writable: opens its file (closing the least recently used one if too
    /// many are open) and marks it most recently used.
    pub(super) fn touch(&mut self, i: usize) -> io::Result<()> {
        if let Some(at) = self.open.iter().position(|&o| o == i) {
            if at + 1 != self.open.len() {
                self.open.remove(at);
                self.open.push_back(i);
            }
            return Ok(());
        }
        if self.outputs[i].dest.is_open() {
            return Ok(()); // stdout
        }
        while self.open.len() >= self.max_open {
            match self.open.pop_front() {
                Some(old) => self.close_for_room(old)?,
                None => break,
            }
        }
        loop {
            match self.outputs[i].dest.open() {
                // out of descriptors all the same (other threads hold some): keep fewer open
                Err(e) if e.raw_os_error() == Some(EMFILE) && !self.open.is_empty() => {
                    if let Some(old) = self.open.pop_front() {
                        self.close_for_room(old)?;
                    }
                    self.max_open = self.open.len().max(1);
                }
                result => break result?,
            }
        }
        self.open.push_back(i);
        Ok(())
    }

    /// Writes rows to output `i`, after its preamble if they are its first; a rotated output's
    /// rows may begin new files (`rotate_outputs`).
    pub(crate) fn write(&mut self, i: usize, rows: &Rows<'_>) -> io::Result<()> {
        self.reopen_if_asked()?;
        if self.rotations.get(i).is_some_and(Option::is_some) {
            return self.write_rotated(i, rows);
        }
        self.write_rows(i, rows)
    }

    /// `write` into output `i`'s current file.
    pub(super) fn write_rows(&mut self, i: usize, rows: &Rows<'_>) -> io::Result<()> {
        let out = &mut self.outputs[i];
        if let Destination::Messages(messages) = &mut out.dest {
            // every message is one row that says what it is: no preamble, any width
            out.frames += rows.count;
            return messages.send(rows);
        }
        match out.bins {
            Some(fixed) if fixed != rows.bins => {
                if let Some(e) = self.encoder.width_error(rows.first.id, rows.bins, fixed) {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, e));
                }
            }
            Some(_) => {}
            None => out.bins = Some(rows.bins),
        }
        if self.placed.get(i).is_some() {
            out.frames += rows.count; // already in place
            return Ok(());
        }
        self.touch(i)?;
        let out = &mut self.outputs[i];
        if !out.started {
            out.started = true;
            let preamble = self.encoder.preamble(rows.first, rows.n);
            out.preamble_bytes = preamble.len() as u64;
            out.dest.write_all(&preamble)?;
        }
        if let Some(row_bytes) = (rows.bytes.len() as u64).checked_div(rows.count) {
            out.row_bytes = row_bytes;
        }
        out.frames += rows.count;
        out.dirty = true;
        out.dest.write_all(rows.bytes)
    }

    /// Pushes buffered bytes of outputs written since the last flush (for live use). A file
    /// whose header counts its rows (npy) is given the count of the rows now in it, so a
    /// process ended at once (a second signal, SIGKILL) leaves a file that loads with them.
    pub(crate) fn flush(&mut self) -> Result<(), (usize, io::Error)> {
        for i in 0..self.outputs.len() {
            self.flush_one(i).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// `flush` for output `i`: its buffer, and its header's row count.
    fn flush_one(&mut self, i: usize) -> io::Result<()> {
        let out = &mut self.outputs[i];
        if !out.dirty {
            return Ok(());
        }
        out.dirty = false;
        out.dest.flush()?;
        let seekable = matches!(out.dest, Destination::File { .. });
        let bins = out.bins.unwrap_or(0);
        if let Some(header) = self
            .encoder
            .final_header(out.frames, bins)
            .filter(|_| seekable)
        {
            out.dest.write_at_start(&header)?;
        }
        Ok(())
    }

    /// Closes output `old` to make room for another open file: flushed first, its header
    /// counting its rows, so a process ended before it is reopened leaves it whole.
    fn close_for_room(&mut self, old: usize) -> io::Result<()> {
        self.flush_one(old)?;
        self.outputs[old].dest.close()
    }

    /// Completes every output: creates the files of those that got no rows, rewrites headers
    /// that carry the frame count, flushes and closes. Goes on past an error (so every file is
    /// completed that can be) and returns the first. In a run that failed (`run_failed`) an
    /// output that got no rows is left as it was: not created, and a file already there (an
    /// earlier run's) not emptied (a placed one's part file is removed with it); one opened
    /// already (stdout, a new file) gets no header either.
    pub(crate) fn finish(
        &mut self,
        run_failed: bool,
        streams: &[StreamMeta],
    ) -> Result<(), (usize, io::Error)> {
        let mut first_error = None;
        for i in 0..self.outputs.len() {
            let unplaced = self.placed.get(i).is_some() && self.outputs[i].frames == 0;
            if run_failed && (self.never_written(i) || unplaced) {
                continue;
            }
            let done = match run_failed && self.rowless_file(i) {
                true => self.close_rowless(i),
                false => (self.head_unwritten(i, streams)).and_then(|_| self.finish_one(i)),
            };
            if let Err(e) = done {
                first_error.get_or_insert((i, e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes the preamble of an output that got no rows and whose rows' shape is known (not a
    /// placed output, or NATS), as rows would have: npy then says (0, bins).
    fn head_unwritten(&mut self, i: usize, streams: &[StreamMeta]) -> io::Result<()> {
        let out = &self.outputs[i];
        let plain = !matches!(out.dest, Destination::Messages(_)) && self.placed.get(i).is_none();
        let shape = self.shapes.get(i).copied().flatten();
        let first = shape.and_then(|shape| Some((shape, streams.get(shape.stream)?)));
        let Some((shape, first)) = first.filter(|_| !out.started && plain) else {
            return Ok(());
        };
        let rows = Rows {
            first,
            n: shape.n,
            bins: shape.bins,
            count: 0,
            bytes: &[],
            marks: &[],
        };
        self.write(i, &rows)
    }

    /// Whether output `i` is stdout or a file (not placed, an image or NATS) that got no row.
    fn rowless_file(&self, i: usize) -> bool {
        let out = &self.outputs[i];
        let plain = matches!(out.dest, Destination::Stdout(_) | Destination::File { .. });
        plain && !out.started && self.placed.get(i).is_none()
    }

    /// A failed run's output that got no row, opened already (stdout, a new file): closed as
    /// it is, with no header a run with rows would have given it.
    fn close_rowless(&mut self, i: usize) -> io::Result<()> {
        self.open.retain(|&o| o != i);
        self.outputs[i].dest.close()
    }

    /// Whether output `i` is a file nothing was written to or created yet (not placed, not
    /// begun, no rotation file begun).
    fn never_written(&self, i: usize) -> bool {
        let out = &self.outputs[i];
        let rotation = self.rotations.get(i).and_then(Option::as_ref);
        out.dest.untouched()
            && !out.started
            && self.placed.get(i).is_none()
            && rotation.is_none_or(|r| r.never_begun() && !r.is_open())
    }

    /// After a write error: cuts every placed file to the rows counted in order (with its final
    /// header), and a file whose header carries its row count (npy) to the whole rows it holds,
    /// with that count (a disk that filled left it with a header of none). Neither needs more
    /// room on the disk. Other outputs hold what was written before the error.
    pub(crate) fn finish_after_error(&mut self) {
        for i in 0..self.outputs.len() {
            if self.placed.get(i).is_some() {
                let _ = self.finish_one(i);
            } else if let Err(e) = self.cut_to_whole_rows(i) {
                tracing::debug!("{}: after the write error: {e}", self.describe(i));
            }
        }
    }

    /// `finish_after_error` for an ordinary file whose header carries its row count.
    fn cut_to_whole_rows(&mut self, i: usize) -> io::Result<()> {
        let out = &mut self.outputs[i];
        let Some(bins) = out.bins.filter(|_| out.started && out.row_bytes > 0) else {
            return Ok(());
        };
        if self.encoder.final_header(0, bins).is_none() {
            return Ok(());
        }
        let Some(file) = out.dest.give_up()? else {
            return Ok(());
        };
        let held = file.metadata()?.len().saturating_sub(out.preamble_bytes);
        let whole = (held / out.row_bytes).min(out.frames);
        file.set_len(out.preamble_bytes + whole * out.row_bytes)?;
        let header = self.encoder.final_header(whole, bins).unwrap_or_default();
        std::os::unix::fs::FileExt::write_all_at(&file, &header, 0)?;
        self.open.retain(|&o| o != i);
        Ok(())
    }

    pub(super) fn finish_one(&mut self, i: usize) -> io::Result<()> {
        if self.finish_unbegun(i)? {
            return Ok(());
        }
        if let Destination::Messages(messages) = &mut self.outputs[i].dest {
            return messages.finish(); // every row acknowledged
        }
        let out = &self.outputs[i];
        let header = self.encoder.final_header(out.frames, out.bins.unwrap_or(0));
        if let Some(placed) = self.placed.get(i) {
            return placed.finish(out.frames, header.as_deref());
        }
        if header.is_some() || !out.started {
            self.touch(i)?; // creates a file that got no rows
        }
        let out = &mut self.outputs[i];
        if let Some(header) = header {
            out.dest.write_at_start(&header)?;
        }
        out.dest.close()?;
        self.open.retain(|&o| o != i);
        Ok(())
    }
}
