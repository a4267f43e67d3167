//! The RIFF/WAVE header: walks the chunks of a RIFF, RF64 or BW64 file from a stream (no seeking,
//! so it works on pipes) up to the start of the `data` chunk, and says how its samples are encoded
//! and how many data bytes follow. Reads `fmt ` (including WAVE_FORMAT_EXTENSIBLE) and `ds64`;
//! skips every other chunk (LIST, fact, bext, JUNK, ...) with its pad byte.
//!
//! Sizes in a header are hints: they bound what is read, never what is allocated. A data size of
//! 0, 0xFFFFFFFF (arecord, ffmpeg) or sox's 0x7ffff000 placeholder, which producers writing to a
//! pipe leave behind, means "read to the end of the input".

use crate::error::{FftdError, Result};
use std::io::{self, Read};

/// What fftd can decode, listed in "unsupported" errors.
const SUPPORTED: &str = "fftd reads integer PCM (8-bit unsigned, 16/24/32-bit), IEEE float \
                         (32/64-bit), A-law and mu-law (8-bit), plain or in \
                         WAVE_FORMAT_EXTENSIBLE, in RIFF, RF64 and BW64 files";

/// The GUID of a WAVE_FORMAT_EXTENSIBLE subformat without its first two bytes (the format tag).
const SUBFORMAT_BASE: [u8; 14] = [
    0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71,
];

/// Format tags (`wFormatTag`).
const TAG_PCM: u16 = 0x0001;
const TAG_FLOAT: u16 = 0x0003;
const TAG_ALAW: u16 = 0x0006;
const TAG_MULAW: u16 = 0x0007;
const TAG_EXTENSIBLE: u16 = 0xFFFE;

/// How one sample value is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// 8-bit unsigned integer, 128 is zero.
    Unsigned8,
    Int16,
    Int24,
    Int32,
    Float32,
    Float64,
    /// ITU G.711 A-law, one byte.
    ALaw,
    /// ITU G.711 mu-law, one byte.
    MuLaw,
}

impl Encoding {
    /// Bytes per sample value.
    pub fn bytes(self) -> usize {
        match self {
            Encoding::Unsigned8 | Encoding::ALaw | Encoding::MuLaw => 1,
            Encoding::Int16 => 2,
            Encoding::Int24 => 3,
            Encoding::Int32 | Encoding::Float32 => 4,
            Encoding::Float64 => 8,
        }
    }

    pub(crate) fn is_float(self) -> bool {
        matches!(self, Encoding::Float32 | Encoding::Float64)
    }

    /// The encoding for a format tag and bits per sample, if fftd decodes it.
    fn from_tag(tag: u16, bits: u16) -> Option<Encoding> {
        match (tag, bits) {
            (TAG_PCM, 8) => Some(Encoding::Unsigned8),
            (TAG_PCM, 16) => Some(Encoding::Int16),
            (TAG_PCM, 24) => Some(Encoding::Int24),
            (TAG_PCM, 32) => Some(Encoding::Int32),
            (TAG_FLOAT, 32) => Some(Encoding::Float32),
            (TAG_FLOAT, 64) => Some(Encoding::Float64),
            (TAG_ALAW, 8) => Some(Encoding::ALaw),
            (TAG_MULAW, 8) => Some(Encoding::MuLaw),
            _ => None,
        }
    }
}

/// The `fmt ` chunk, as far as fftd needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WavFormat {
    pub encoding: Encoding,
    pub channels: u16,
    /// Sample frames per second.
    pub rate: u32,
}

impl WavFormat {
    /// Bytes per sample frame (one value per channel).
    pub(crate) fn frame_bytes(&self) -> usize {
        self.channels as usize * self.encoding.bytes()
    }
}

/// How much sample data follows the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataLength {
    /// The header's data size, in bytes.
    Bytes(u64),
    /// Unknown (written to a pipe): read to the end of the input.
    ToEof,
}

/// What the header says; the reader is left at the first data byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WavLayout {
    pub format: WavFormat,
    pub data: DataLength,
    /// Where the first sample byte lies, from the input's start.
    pub data_offset: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Container {
    Riff,
    /// RF64 or BW64: 32-bit sizes of 0xFFFFFFFF defer to the `ds64` chunk.
    Rf64,
}

/// Reads the header from `input` up to the first byte of sample data.
pub(crate) fn read_layout(path: &str, input: &mut impl Read) -> Result<WavLayout> {
    let mut input = CountingReader {
        inner: input,
        count: 0,
    };
    let mut walk = ChunkWalk {
        path,
        input: &mut input,
    };
    let container = walk.container()?;
    let mut format = None;
    let mut ds64_data_size = None;
    loop {
        let (id, size) = walk.chunk_header(format.is_some())?;
        match &id {
            b"fmt " if format.is_some() => {
                return Err(walk
                    .error("corrupt WAV header: a second fmt chunk (fftd reads files with one)"))
            }
            b"fmt " => format = Some(walk.fmt(size)?),
            b"ds64" if container == Container::Rf64 => ds64_data_size = Some(walk.ds64(size)?),
            b"data" => {
                let format = format.ok_or_else(|| {
                    FftdError::input(path, "corrupt WAV file: the data chunk comes before fmt")
                })?;
                let data = data_length(container, size, ds64_data_size, format.frame_bytes());
                let data_offset = input.count;
                return Ok(WavLayout {
                    format,
                    data,
                    data_offset,
                });
            }
            _ => walk.skip(&id, padded(size as u64))?,
        }
    }
}

/// A WAV file's chunks after its data (from `data_end`, the data's last byte and one): a
/// second `data` or `fmt ` chunk is an error, as fftd would read the first alone (two files
/// joined end to end, say). Other chunks (LIST, id3) are skipped; so is trailing junk that is
/// no chunk.
pub(crate) fn check_after_data(path: &str, file: &std::fs::File, data_end: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata().map_err(|e| FftdError::io(path, e))?.len();
    let mut at = padded(data_end);
    for _ in 0..MOST_CHUNKS_AFTER_DATA {
        let mut head = [0u8; 8];
        if at + 8 > len || file.read_exact_at(&mut head, at).is_err() {
            break;
        }
        second_chunk(path, &head, at)?;
        at += 8 + padded(u64::from(u32_at(&head, 4)));
    }
    Ok(())
}

/// `check_after_data` for a stream, read on from the end of its data to its end.
pub(crate) fn check_stream_after_data(
    path: &str,
    input: &mut impl Read,
    data_end: u64,
) -> Result<()> {
    let io_error = |e| FftdError::io(path, e);
    let mut at = data_end;
    let mut pad = data_end & 1;
    for _ in 0..MOST_CHUNKS_AFTER_DATA {
        let skipped = io::copy(&mut input.by_ref().take(pad), &mut io::sink()).map_err(io_error)?;
        at += skipped;
        let mut head = [0u8; 8];
        if skipped < pad || read_full(input, &mut head).map_err(io_error)? < 8 {
            break;
        }
        second_chunk(path, &head, at)?;
        at += 8;
        pad = padded(u64::from(u32_at(&head, 4)));
    }
    Ok(())
}

/// How many chunks after the data are looked at.
const MOST_CHUNKS_AFTER_DATA: usize = 1000;

/// A chunk header `head` at byte `at` after the data: a second `data` or `fmt ` is an error.
fn second_chunk(path: &str, head: &[u8; 8], at: u64) -> Result<()> {
    let id = &head[..4];
    if id != b"data" && id != b"fmt " {
        return Ok(());
    }
    Err(FftdError::input(
        path,
        format!(
            "a second {} chunk at byte {at}, after the data: fftd reads WAV files with one (two files joined?)",
            show_id(id)
        ),
    ))
}

/// Counts the bytes read through it: where the sample data starts.
struct CountingReader<R> {
    inner: R,
    count: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

/// A chunk's size on disk: chunks of odd size are followed by a pad byte.
fn padded(size: u64) -> u64 {
    size + (size & 1)
}

/// The data length from the `data` chunk's size field (and `ds64`'s, in RF64 files).
fn data_length(
    container: Container,
    size: u32,
    ds64_data_size: Option<u64>,
    frame_bytes: usize,
) -> DataLength {
    let unknown = |bytes: u64| bytes == 0 || bytes == u32::MAX as u64 || bytes == u64::MAX;
    let bytes = match (container, ds64_data_size) {
        (Container::Rf64, Some(ds64)) if size == u32::MAX => ds64,
        _ => size as u64,
    };
    if unknown(bytes) || is_sox_placeholder(bytes, frame_bytes) {
        DataLength::ToEof
    } else {
        DataLength::Bytes(bytes)
    }
}

/// sox writing to a pipe puts the largest whole number of frames below 0x7ffff000 bytes.
fn is_sox_placeholder(bytes: u64, frame_bytes: usize) -> bool {
    const SOX_UNKNOWN: u64 = 0x7fff_f000;
    let frame = frame_bytes.max(1) as u64;
    bytes == SOX_UNKNOWN - SOX_UNKNOWN % frame
}

/// Reads until `buf` is full or the input ends; returns how many bytes were read.
pub(super) fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

/// A chunk id as text for messages, e.g. `'fmt '` or `'\x00\x01ab'`.
fn show_id(id: &[u8]) -> String {
    format!("'{}'", id.escape_ascii())
}

/// The header being read, with the file name for errors.
struct ChunkWalk<'a, R> {
    path: &'a str,
    input: &'a mut R,
}

impl<R: Read> ChunkWalk<'_, R> {
    fn error(&self, what: impl Into<String>) -> FftdError {
        FftdError::input(self.path, what)
    }

    fn truncated(&self, place: &str) -> FftdError {
        self.error(format!(
            "truncated WAV file: it ends inside the header ({place})"
        ))
    }

    /// Reads exactly `buf.len()` bytes, or says the header is cut short at `place`.
    fn read_exact(&mut self, buf: &mut [u8], place: &str) -> Result<()> {
        let got = read_full(self.input, buf).map_err(|e| FftdError::io(self.path, e))?;
        if got < buf.len() {
            return Err(self.truncated(place));
        }
        Ok(())
    }

    /// The 12-byte `RIFF`/`RF64`/`BW64` <size> `WAVE` preamble.
    fn container(&mut self) -> Result<Container> {
        let mut head = [0u8; 12];
        let got = read_full(self.input, &mut head).map_err(|e| FftdError::io(self.path, e))?;
        let container = match &head[..4] {
            _ if got == 0 => return Err(self.error("no RIFF/WAVE header: the file is empty")),
            _ if got < 4 => {
                return Err(self.error(format!(
                    "no RIFF/WAVE header: the file is only {got} bytes long"
                )))
            }
            b"RIFF" => Container::Riff,
            b"RF64" | b"BW64" => Container::Rf64,
            other => {
                // (a compressed or Apple audio file named .wav: its magic number says which)
                let hint = match crate::source::sniff::format_of_start(&head[..got], true) {
                    Some(f) if f.is_compressed_audio() => format!(
                        "; its content is {}: give --input-format {}",
                        f.name(),
                        f.name()
                    ),
                    _ => String::new(),
                };
                return Err(self.error(format!(
                    "no RIFF/WAVE header (it starts with {}): not a WAV file{hint}",
                    show_id(other)
                )));
            }
        };
        if got < 12 {
            return Err(self.truncated("in the RIFF preamble"));
        }
        if &head[8..12] != b"WAVE" {
            return Err(self.error(format!(
                "no RIFF/WAVE header: a RIFF file of type {}, not WAVE",
                show_id(&head[8..12])
            )));
        }
        Ok(container)
    }

    /// The next chunk's id and 32-bit size.
    fn chunk_header(&mut self, have_fmt: bool) -> Result<([u8; 4], u32)> {
        let mut head = [0u8; 8];
        let got = read_full(self.input, &mut head).map_err(|e| FftdError::io(self.path, e))?;
        if got == 0 {
            let missing = if have_fmt { "data" } else { "fmt" };
            return Err(self.truncated(&format!("no {missing} chunk before the end")));
        }
        if got < 8 {
            return Err(self.truncated("in a chunk header"));
        }
        let id = [head[0], head[1], head[2], head[3]];
        Ok((id, u32_at(&head, 4)))
    }

    /// Reads and discards `len` bytes (a chunk fftd does not use).
    fn skip(&mut self, id: &[u8; 4], len: u64) -> Result<()> {
        let skipped = io::copy(&mut self.input.by_ref().take(len), &mut io::sink())
            .map_err(|e| FftdError::io(self.path, e))?;
        if skipped < len {
            return Err(self.truncated(&format!("in the {} chunk", show_id(id))));
        }
        Ok(())
    }

    /// Reads the first `keep` bytes of a chunk of `size` bytes (plus pad) and skips the rest.
    fn chunk_body<'b>(&mut self, id: &[u8; 4], size: u32, buf: &'b mut [u8]) -> Result<&'b [u8]> {
        let keep = buf.len().min(size as usize);
        let place = format!("in the {} chunk", show_id(id));
        self.read_exact(&mut buf[..keep], &place)?;
        self.skip(id, padded(size as u64) - keep as u64)?;
        Ok(&buf[..keep])
    }

    /// The `fmt ` chunk: encoding, channels and rate.
    fn fmt(&mut self, size: u32) -> Result<WavFormat> {
        let mut buf = [0u8; 40];
        let body = self.chunk_body(b"fmt ", size, &mut buf)?;
        if body.len() < 16 {
            return Err(self.error(format!(
                "corrupt WAV header: the fmt chunk is {size} bytes, less than 16"
            )));
        }
        let tag = u16_at(body, 0);
        let channels = u16_at(body, 2);
        let rate = u32_at(body, 4);
        let bits = u16_at(body, 14);
        // PCM of 12 or 20 bits (any not a whole byte) lies left-justified in the smallest whole
        // bytes, the low bits zero (the RIFF spec), as in an EXTENSIBLE container: read as those
        let block_align = u16_at(body, 12);
        let whole_bytes = bits.div_ceil(8) * 8;
        let bits = match tag {
            TAG_PCM if bits % 8 != 0 && block_align == channels.saturating_mul(whole_bytes / 8) => {
                whole_bytes
            }
            _ => bits,
        };
        let encoding = match tag {
            TAG_EXTENSIBLE => self.extensible_encoding(body, bits)?,
            _ => Encoding::from_tag(tag, bits).ok_or_else(|| {
                self.error(format!(
                    "unsupported WAV encoding: format tag {tag:#06x} ({}) with {bits} bits per sample; {SUPPORTED}",
                    tag_name(tag)
                ))
            })?,
        };
        if channels == 0 || rate == 0 {
            return Err(self.error(format!(
                "corrupt WAV header: {channels} channels at {rate} Hz (zero channels or zero sample rate)"
            )));
        }
        Ok(WavFormat {
            encoding,
            channels,
            rate,
        })
    }

    /// The encoding of a WAVE_FORMAT_EXTENSIBLE `fmt ` body: its subformat GUID names the tag;
    /// `bits` is the container size (valid bits may be fewer: the low ones are then zero).
    fn extensible_encoding(&self, body: &[u8], bits: u16) -> Result<Encoding> {
        if body.len() < 40 {
            return Err(self.error(format!(
                "corrupt WAV header: a WAVE_FORMAT_EXTENSIBLE fmt chunk of {} bytes, less than 40",
                body.len()
            )));
        }
        let guid = &body[24..40];
        if guid[2..] != SUBFORMAT_BASE {
            return Err(self.error(format!(
                "unsupported WAV encoding: WAVE_FORMAT_EXTENSIBLE subformat GUID {}; {SUPPORTED}",
                show_guid(guid)
            )));
        }
        let tag = u16_at(guid, 0);
        Encoding::from_tag(tag, bits).ok_or_else(|| {
            self.error(format!(
                "unsupported WAV encoding: WAVE_FORMAT_EXTENSIBLE subformat {tag:#06x} ({}) with {bits} bits per sample; {SUPPORTED}",
                tag_name(tag)
            ))
        })
    }

    /// The `ds64` chunk of an RF64/BW64 file: the 64-bit data size.
    fn ds64(&mut self, size: u32) -> Result<u64> {
        let mut buf = [0u8; 24];
        let body = self.chunk_body(b"ds64", size, &mut buf)?;
        if body.len() < 24 {
            return Err(self.error(format!(
                "corrupt WAV header: the ds64 chunk is {size} bytes, less than 24"
            )));
        }
        Ok(u64_at(body, 8))
    }
}

/// A few common format tags by name, for error messages.
fn tag_name(tag: u16) -> &'static str {
    match tag {
        TAG_PCM => "integer PCM",
        0x0002 => "Microsoft ADPCM",
        TAG_FLOAT => "IEEE float",
        TAG_ALAW => "A-law",
        TAG_MULAW => "mu-law",
        0x0011 => "IMA ADPCM",
        0x0031 => "GSM 6.10",
        0x0050 => "MPEG",
        0x0055 => "MPEG layer 3",
        0x2000 => "AC-3",
        TAG_EXTENSIBLE => "WAVE_FORMAT_EXTENSIBLE",
        _ => "unknown",
    }
}

/// A GUID in its usual text form (the first three fields are little-endian).
fn show_guid(g: &[u8]) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:02x}{:02x}-{}",
        u32_at(g, 0),
        u16_at(g, 4),
        u16_at(g, 6),
        g[8],
        g[9],
        g[10..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}
