//! `--format text`: one line per frame, values separated by single spaces, each the shortest
//! decimal that reads back to the same float (`numpy.loadtxt` reads it).

use super::destination::Destination;
use super::{LineWriter, Sample, SpectrumRow, SpectrumWriter};
use std::io;

pub struct TextWriter {
    out: LineWriter,
}

impl TextWriter {
    pub fn new(dest: Destination) -> Self {
        TextWriter {
            out: LineWriter::new(dest),
        }
    }
}

impl<T: Sample> SpectrumWriter<T> for TextWriter {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()> {
        self.out.numbers(row.values, b' ').end_line()
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
