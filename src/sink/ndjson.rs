//! `--format ndjson`: one JSON object per line and frame:
//! `{"stream":0,"frame":12,"time_s":0.25,"bins":[...]}`.

use super::destination::Destination;
use super::{LineWriter, Sample, SpectrumRow, SpectrumWriter};
use std::io;

pub struct NdjsonWriter {
    out: LineWriter,
}

impl NdjsonWriter {
    pub fn new(dest: Destination) -> Self {
        NdjsonWriter {
            out: LineWriter::new(dest),
        }
    }
}

impl<T: Sample> SpectrumWriter<T> for NdjsonWriter {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()> {
        let head = format!(
            "{{\"stream\":{},\"frame\":{},\"time_s\":",
            row.stream.id, row.frame
        );
        self.out
            .text(&head)
            .number(row.time_s)
            .text(",\"bins\":[")
            .numbers(row.values, b',')
            .text("]}")
            .end_line()
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
