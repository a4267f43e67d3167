//! An AIFF or CAF file cut short, read as far as it goes.
//!
//! symphonia's AIFF and CAF readers walk a seekable file's chunks to the end of its sound data
//! before they give a sample, so a file that ends inside that data (a copy stopped early, a
//! recorder that died) failed before its first row with a message about its header. Given such
//! a file, this module gives the prober a second view of it that stops where the file does:
//! - AIFF read front to back, as from a pipe: the reader stops at the sound chunk;
//! - CAF with its data chunk's size read as what the file holds (the size field alone is
//!   changed, in the view, never in the file).
//!
//! The source then decodes every whole sample the file holds and, at its end, reports the cut
//! (`CutShort::said`) as an error: the rows come out, and the run still fails.

use super::InputFormat;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use symphonia::core::io::{MediaSource, ReadOnlySource};

/// A second view of a file cut short, and what to say of the cut once its samples are decoded.
pub(super) struct CutShort {
    pub(super) view: Box<dyn MediaSource>,
    pub(super) said: String,
}

/// The view that reads `file` (AIFF or CAF) as far as it goes, when its header
/// gives more bytes than it holds; None for any other file, or one whose header cannot be read.
pub(super) fn second_view(format: InputFormat, file: &File) -> Option<CutShort> {
    let held = file.metadata().ok()?.len();
    match format {
        InputFormat::Aiff => aiff_in_sequence(file, held),
        InputFormat::Caf => caf_data_as_held(file, held),
        _ => None,
    }
}

/// An AIFF whose FORM chunk gives more bytes than the file holds, read front to back.
fn aiff_in_sequence(file: &File, held: u64) -> Option<CutShort> {
    let mut head = [0u8; 8];
    file.read_exact_at(&mut head, 0).ok()?;
    let form = u64::from(u32::from_be_bytes(head[4..8].try_into().ok()?)) + 8;
    if &head[..4] != b"FORM" || form <= held {
        return None;
    }
    let mut file = file.try_clone().ok()?;
    file.seek(SeekFrom::Start(0)).ok()?;
    Some(CutShort {
        view: Box::new(ReadOnlySource::new(file)),
        said: said("AIFF", held, form),
    })
}

/// A CAF whose data chunk runs past the file's end, with that chunk's size read as the bytes
/// that follow its header.
fn caf_data_as_held(file: &File, held: u64) -> Option<CutShort> {
    let mut at = 8u64; // after 'caff', the version and the flags
    loop {
        let mut header = [0u8; 12];
        file.read_exact_at(&mut header, at).ok()?;
        let size = i64::from_be_bytes(header[4..12].try_into().ok()?);
        let body = at + 12;
        let end = body.checked_add(u64::try_from(size).ok()?)?;
        if &header[..4] != b"data" {
            at = end;
            continue;
        }
        if end <= held {
            return None;
        }
        let patched = i64::try_from(held - body).ok()?.to_be_bytes();
        let file = file.try_clone().ok()?;
        return Some(CutShort {
            view: Box::new(Patched::new(file, held, at + 4, patched)),
            said: said("CAF", held, end),
        });
    }
}

fn said(container: &str, held: u64, given: u64) -> String {
    format!(
        "{container} stream ends early (truncated): the file holds {held} of the {given} bytes its header gives"
    )
}

/// A file read with eight bytes at `at` replaced by `bytes`.
struct Patched {
    file: File,
    len: u64,
    pos: u64,
    at: u64,
    bytes: [u8; 8],
}

impl Patched {
    fn new(file: File, len: u64, at: u64, bytes: [u8; 8]) -> Self {
        let pos = 0;
        Patched {
            file,
            len,
            pos,
            at,
            bytes,
        }
    }
}

impl Read for Patched {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let got = self.file.read_at(buf, self.pos)?;
        let (start, end) = (self.pos, self.pos + got as u64);
        for offset in self.at.max(start)..(self.at + 8).min(end) {
            buf[(offset - start) as usize] = self.bytes[(offset - self.at) as usize];
        }
        self.pos = end;
        Ok(got)
    }
}

impl Seek for Patched {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| io::Error::other("seek before the file's start"))?;
        Ok(self.pos)
    }
}

impl MediaSource for Patched {
    fn is_seekable(&self) -> bool {
        true
    }

    fn byte_len(&self) -> Option<u64> {
        Some(self.len)
    }
}
