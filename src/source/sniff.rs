//! The format of an input that has no `--input-format` and no extension fftd knows (stdin, a
//! FIFO, process substitution's `/dev/fd/N`, `recording.dat`), told from its first bytes: the
//! audio containers symphonia reads and WAV by their magic numbers, anything else text (fftd's
//! default). Only as many bytes are awaited as can still match a magic number, so a text stream
//! whose first line is short is never kept waiting.

use super::input::InputReader;
use super::InputFormat;
use std::io;

/// Bytes a magic number needs at most (`FORM....AIFF`, `RIFF....WAVE`, `....ftyp`).
const LONGEST: usize = 12;

/// A magic number: bytes at offsets, `None` for any byte.
struct Magic {
    format: InputFormat,
    pattern: &'static [Option<u8>],
}

macro_rules! b {
    (_) => {
        None
    };
    ($c:expr) => {
        Some($c)
    };
}

const MAGICS: &[Magic] = &[
    Magic {
        format: InputFormat::Flac,
        pattern: &[b!(b'f'), b!(b'L'), b!(b'a'), b!(b'C')],
    },
    Magic {
        format: InputFormat::Ogg,
        pattern: &[b!(b'O'), b!(b'g'), b!(b'g'), b!(b'S')],
    },
    // an ID3v2 tag, which MP3 files start with more often than not
    Magic {
        format: InputFormat::Mp3,
        pattern: &[b!(b'I'), b!(b'D'), b!(b'3')],
    },
    Magic {
        format: InputFormat::Caf,
        pattern: &[b!(b'c'), b!(b'a'), b!(b'f'), b!(b'f')],
    },
    Magic {
        format: InputFormat::Aiff,
        pattern: &[
            b!(b'F'),
            b!(b'O'),
            b!(b'R'),
            b!(b'M'),
            b!(_),
            b!(_),
            b!(_),
            b!(_),
            b!(b'A'),
            b!(b'I'),
            b!(b'F'),
        ],
    },
    // an MP4 file's first box is a small `ftyp` (its 32-bit size starts with a 0 byte)
    Magic {
        format: InputFormat::M4a,
        pattern: &[
            b!(0),
            b!(_),
            b!(_),
            b!(_),
            b!(b'f'),
            b!(b't'),
            b!(b'y'),
            b!(b'p'),
        ],
    },
    Magic {
        format: InputFormat::Wav,
        pattern: &[
            b!(b'R'),
            b!(b'I'),
            b!(b'F'),
            b!(b'F'),
            b!(_),
            b!(_),
            b!(_),
            b!(_),
            b!(b'W'),
            b!(b'A'),
            b!(b'V'),
            b!(b'E'),
        ],
    },
    Magic {
        format: InputFormat::Wav,
        pattern: &[b!(b'R'), b!(b'F'), b!(b'6'), b!(b'4')],
    },
    Magic {
        format: InputFormat::Wav,
        pattern: &[b!(b'B'), b!(b'W'), b!(b'6'), b!(b'4')],
    },
];

/// Whether `bytes` agree with `pattern` as far as both go.
fn agrees(pattern: &[Option<u8>], bytes: &[u8]) -> bool {
    pattern
        .iter()
        .zip(bytes)
        .all(|(want, got)| want.is_none_or(|w| w == *got))
}

/// An MPEG audio frame's sync word: eleven 1 bits, then a layer that is not 0 (the ADTS header
/// of raw AAC starts the same way; symphonia tells the two apart).
fn mpeg_sync(bytes: &[u8]) -> Option<bool> {
    match bytes {
        [] => None,
        [0xFF] => None,
        [0xFF, second, ..] => Some(second & 0xE0 == 0xE0),
        _ => Some(false),
    }
}

/// The format `bytes` (an input's first bytes, all of them if it is shorter than `LONGEST`)
/// show, or `None` while more bytes could still match a magic number.
pub(crate) fn format_of_start(bytes: &[u8], complete: bool) -> Option<InputFormat> {
    if let Some(m) = MAGICS
        .iter()
        .find(|m| bytes.len() >= m.pattern.len() && agrees(m.pattern, bytes))
    {
        return Some(m.format);
    }
    match mpeg_sync(bytes) {
        Some(true) => return Some(InputFormat::Mp3),
        None if !complete => return None,
        _ => {}
    }
    let mut open = MAGICS
        .iter()
        .filter(|m| bytes.len() < m.pattern.len() && agrees(m.pattern, bytes));
    if !complete {
        return open.next().map_or(Some(InputFormat::Text), |_| None);
    }
    // an input cut inside a magic number it has begun (`RIFF` and no `WAVE`): that format,
    // whose reader says where it ends, not text
    let begun = open.find(|m| distinct_bytes(m, bytes.len()) >= 4);
    Some(begun.map_or(InputFormat::Text, |m| m.format))
}

/// How many of the first `len` bytes of `m`'s pattern are given (not any byte).
fn distinct_bytes(m: &Magic, len: usize) -> usize {
    m.pattern[..len].iter().filter(|b| b.is_some()).count()
}

/// The format of `reader`'s input from its first bytes (left in the reader to be read again).
pub(crate) fn sniff(reader: &mut InputReader) -> io::Result<InputFormat> {
    let start = reader.peek_start(LONGEST, |b| format_of_start(b, false).is_none())?;
    Ok(format_of_start(start, true).unwrap_or(InputFormat::Text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sniffed(bytes: &[u8]) -> InputFormat {
        let mut reader = InputReader::from_read(std::io::Cursor::new(bytes.to_vec()));
        let format = sniff(&mut reader).expect("sniff");
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut back).expect("read");
        assert_eq!(back, bytes, "the sniffed bytes are read again");
        format
    }

    #[test]
    fn magic_numbers_name_their_formats() {
        assert_eq!(sniffed(b"fLaC\0\0\0\x22rest"), InputFormat::Flac);
        assert_eq!(sniffed(b"OggS\0\x02"), InputFormat::Ogg);
        assert_eq!(sniffed(b"ID3\x04\0\0"), InputFormat::Mp3);
        assert_eq!(sniffed(&[0xFF, 0xFB, 0x90, 0x64]), InputFormat::Mp3);
        assert_eq!(sniffed(b"caff\0\x01\0\0"), InputFormat::Caf);
        assert_eq!(sniffed(b"FORM\0\0\x10\0AIFFCOMM"), InputFormat::Aiff);
        assert_eq!(sniffed(b"FORM\0\0\x10\0AIFCFVER"), InputFormat::Aiff);
        assert_eq!(sniffed(b"\0\0\0\x20ftypM4A "), InputFormat::M4a);
        assert_eq!(sniffed(b"RIFF\x24\0\0\0WAVEfmt "), InputFormat::Wav);
        assert_eq!(sniffed(b"RF64\xff\xff\xff\xffWAVE"), InputFormat::Wav);
        // cut inside the magic number, past its first four bytes: that format, not text
        assert_eq!(sniffed(b"RIFF\x24\0"), InputFormat::Wav);
        assert_eq!(sniffed(b"FORM\0\0\0\x10AI"), InputFormat::Aiff);
        assert_eq!(sniffed(b"RIF"), InputFormat::Text);
        assert_eq!(sniffed(b"\0\0\0\x20ft"), InputFormat::Text);
    }

    #[test]
    fn anything_else_is_text_without_waiting_for_more() {
        for text in [
            &b"0.5\n0.25\n"[..],
            b"1",
            b"",
            b"# comment\n",
            b"RIFX....WAVE",
            b"FORM\0\0\0\0SVX8",
            b"\0\0\0\x20moov",
            b"\xff\x00",
        ] {
            assert_eq!(sniffed(text), InputFormat::Text, "{text:?}");
        }
        // a prefix of a magic number waits for more (`None`) unless the input ended
        assert_eq!(format_of_start(b"fL", false), None);
        assert_eq!(format_of_start(b"fL", true), Some(InputFormat::Text));
        assert_eq!(format_of_start(b"1.5", false), Some(InputFormat::Text));
    }
}
