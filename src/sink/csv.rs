//! `--format csv`: a header `stream,frame,time_s,` followed by each bin's frequency in Hz, then one
//! row per frame. Streams sharing one file must have the same bins (same frame size and kind).

use super::destination::Destination;
use super::{push_number, Sample, SpectrumRow, SpectrumWriter};
use std::io::{self, Write};

pub struct CsvWriter {
    dest: Destination,
    /// Bins per row, fixed by the header once written.
    header_bins: Option<usize>,
    line: Vec<u8>,
    numbers: ryu::Buffer,
}

impl CsvWriter {
    pub fn new(dest: Destination) -> Self {
        CsvWriter {
            dest,
            header_bins: None,
            line: Vec::new(),
            numbers: ryu::Buffer::new(),
        }
    }
}

impl<T: Sample> SpectrumWriter<T> for CsvWriter {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()> {
        self.line.clear();
        match self.header_bins {
            None => {
                self.line.extend_from_slice(b"stream,frame,time_s");
                for f in row.stream.frequencies(row.n) {
                    self.line.push(b',');
                    push_number(&mut self.line, &mut self.numbers, f);
                }
                self.line.push(b'\n');
                self.header_bins = Some(row.values.len());
            }
            Some(bins) if bins != row.values.len() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "stream {} has {} bins per frame but the CSV header has {bins}: write streams of different frame sizes with --output-dir",
                        row.stream.id,
                        row.values.len()
                    ),
                ))
            }
            Some(_) => {}
        }
        write!(self.line, "{},{},", row.stream.id, row.frame)?;
        push_number(&mut self.line, &mut self.numbers, row.time_s);
        for v in row.values {
            self.line.push(b',');
            push_number(&mut self.line, &mut self.numbers, *v);
        }
        self.line.push(b'\n');
        self.dest.write_all(&self.line)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.dest.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        self.dest.flush()
    }
}
