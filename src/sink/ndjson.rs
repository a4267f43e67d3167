//! `--format ndjson`: one JSON object per line and frame:
//! `{"stream":0,"frame":12,"time_s":0.25,"bins":[...]}`.

use super::destination::Destination;
use super::{push_number, Sample, SpectrumRow, SpectrumWriter};
use std::io::{self, Write};

pub struct NdjsonWriter {
    dest: Destination,
    line: Vec<u8>,
    numbers: ryu::Buffer,
}

impl NdjsonWriter {
    pub fn new(dest: Destination) -> Self {
        NdjsonWriter {
            dest,
            line: Vec::new(),
            numbers: ryu::Buffer::new(),
        }
    }
}

impl<T: Sample> SpectrumWriter<T> for NdjsonWriter {
    fn write(&mut self, row: &SpectrumRow<'_, T>) -> io::Result<()> {
        self.line.clear();
        write!(
            self.line,
            "{{\"stream\":{},\"frame\":{},\"time_s\":",
            row.stream.id, row.frame
        )?;
        push_number(&mut self.line, &mut self.numbers, row.time_s);
        self.line.extend_from_slice(b",\"bins\":[");
        for (i, v) in row.values.iter().enumerate() {
            if i > 0 {
                self.line.push(b',');
            }
            push_number(&mut self.line, &mut self.numbers, *v);
        }
        self.line.extend_from_slice(b"]}\n");
        self.dest.write_all(&self.line)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.dest.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        self.dest.flush()
    }
}
