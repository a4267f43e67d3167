//! `--format text`: one line per frame, values separated by single spaces, each the shortest
//! decimal that reads back to the same float (`numpy.loadtxt` reads it).

use super::destination::Destination;
use super::{push_number, Sample, SpectrumRow, SpectrumWriter};
use std::io::{self, Write};

pub struct TextWriter {
    dest: Destination,
    line: Vec<u8>,
    numbers: ryu::Buffer,
}

impl TextWriter {
    pub fn new(dest: Destination) -> Self {
        TextWriter {
            dest,
            line: Vec::new(),
            numbers: ryu::Buffer::new(),
        }
    }
}

impl<T: Sample> SpectrumWriter<T> for TextWriter {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()> {
        self.line.clear();
        for (i, v) in row.values.iter().enumerate() {
            if i > 0 {
                self.line.push(b' ');
            }
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
