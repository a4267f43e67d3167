//! `--format csv`: a header `stream,frame,time_s,` followed by each bin's frequency in Hz, then one
//! row per frame. Streams sharing one file must have the same bins (same frame size and kind).

use super::destination::Destination;
use super::{LineWriter, Sample, SpectrumRow, SpectrumWriter};
use std::io;

pub struct CsvWriter {
    out: LineWriter,
    /// Bins per row, fixed by the header once written.
    header_bins: Option<usize>,
}

impl CsvWriter {
    pub fn new(dest: Destination) -> Self {
        CsvWriter {
            out: LineWriter::new(dest),
            header_bins: None,
        }
    }
}

impl<T: Sample> SpectrumWriter<T> for CsvWriter {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()> {
        match self.header_bins {
            None => {
                let frequencies = row.stream.frequencies(row.n);
                self.out
                    .text("stream,frame,time_s,")
                    .numbers(&frequencies, b',')
                    .end_line()?;
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
        let head = format!("{},{},", row.stream.id, row.frame);
        self.out
            .text(&head)
            .number(row.time_s)
            .text(",")
            .numbers(row.values, b',')
            .end_line()
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
