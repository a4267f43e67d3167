//! Text input: one sample per line, as in the classic `input.txt`. A line holds one number (a real
//! sample) or two (`re im`, a complex sample); the first sample line decides which for the whole
//! file. Blank lines, lines starting with `#` (whatever bytes follow) and a leading UTF-8
//! byte-order mark are skipped.
//! Anything else — a bad token, NaN or infinity, a number beyond the working precision (1e39 in
//! f32), a line of the other kind — is an error naming the line number and its text.

use super::input::InputReader;
use super::{overflows, SampleSource, SourceInfo, BEYOND_F32};
use crate::error::{FftdError, Result};
use crate::types::Precision;
use crate::types::{escaped, InputKind};
use std::io::{BufRead, Read};

/// The longest line read: a sample line is a few dozen bytes, a comment a few hundred. Input
/// with no line end within this is not text (a binary file taken as text for want of a known
/// extension, `/dev/zero`), and reading on would fill memory.
const MAX_LINE_BYTES: usize = 64 << 10;

pub struct TextSource {
    info: SourceInfo,
    reader: InputReader,
    line: Vec<u8>,
    line_no: u64,
    samples: u64,
    /// Decided by the first sample line.
    kind: Option<InputKind>,
    saw_lines: bool,
    /// Numbers beyond its range are errors.
    precision: Precision,
}

impl TextSource {
    pub fn new(path: &str, reader: InputReader, rate: f64) -> Self {
        TextSource {
            info: SourceInfo {
                name: path.to_string(),
                rate,
                channels: 1,
                kind: InputKind::Real,
                live: false,
            },
            reader,
            line: Vec::with_capacity(64),
            line_no: 0,
            samples: 0,
            kind: None,
            saw_lines: false,
            precision: Precision::F32,
        }
    }

    /// Reads for analysis in `precision` (f32 unless told): numbers beyond it are errors.
    pub fn in_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    fn error(&self, what: String) -> FftdError {
        FftdError::input(
            self.info.name.clone(),
            format!("line {}: {what}", self.line_no),
        )
    }

    /// Reads the next sample line; `None` at end of input.
    fn next_sample(&mut self) -> Result<Option<(f64, Option<f64>)>> {
        loop {
            self.line.clear();
            let n = (&mut self.reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut self.line)
                .map_err(|e| FftdError::io(&self.info.name, e))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            if n > MAX_LINE_BYTES {
                return Err(self.error(format!(
                    "no line end within {} KiB: not text of one sample per line (for a binary file, give --input-format)",
                    MAX_LINE_BYTES >> 10
                )));
            }
            self.saw_lines = true;
            if is_comment(&self.line) {
                continue; // (whatever its bytes: a comment in Latin-1 is still one)
            }
            let text = match std::str::from_utf8(&self.line) {
                // a UTF-8 byte-order mark (Windows editors, Excel exports) opens the first line
                Ok(t) if self.line_no == 1 => t.strip_prefix('\u{feff}').unwrap_or(t).trim(),
                Ok(t) => t.trim(),
                Err(_) => return Err(self.error("is not valid UTF-8 text".to_string())),
            };
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let mut tokens = text.split_whitespace();
            let first = tokens.next().map(|t| self.number(t)).transpose()?;
            let second = tokens.next().map(|t| self.number(t)).transpose()?;
            if tokens.next().is_some() {
                return Err(self.error(format!(
                    "expected one number (re) or two (re im), found '{}'",
                    shorten(text)
                )));
            }
            return match first {
                Some(re) => Ok(Some((re, second))),
                None => continue,
            };
        }
    }

    fn number(&self, token: &str) -> Result<f64> {
        match token.parse::<f64>() {
            Ok(v) if v.is_finite() && overflows(v, self.precision) => {
                Err(self.error(format!("'{}' is {BEYOND_F32}", shorten(token))))
            }
            Ok(v) if v.is_finite() => Ok(v),
            Ok(_) => Err(self.error(format!("'{}' is not a finite number", shorten(token)))),
            Err(_) => Err(self.error(format!("cannot read '{}' as a number", shorten(token)))),
        }
    }

    /// Reads ahead to the first sample so `info().kind` is known before framing starts.
    pub(crate) fn detect_kind(&mut self) -> Result<Option<(f64, Option<f64>)>> {
        let first = self.next_sample()?;
        if let Some((_, im)) = first {
            let kind = if im.is_some() {
                InputKind::Complex
            } else {
                InputKind::Real
            };
            self.kind = Some(kind);
            self.info.kind = kind;
        }
        Ok(first)
    }
}

/// Whether `line` is a comment: `#` first, after blanks (and a UTF-8 byte-order mark).
fn is_comment(line: &[u8]) -> bool {
    let line = line.trim_ascii_start();
    let line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
    line.trim_ascii_start().first() == Some(&b'#')
}

/// Offending text as an error quotes it: cut when long and its control characters written out
/// (`\0`, `\x1b`), so the error stays one readable line.
fn shorten(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        escaped(text).into_owned()
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{}…", escaped(&head))
    }
}

/// A text source whose first sample has been read ahead to learn the sample kind.
pub struct PrimedTextSource {
    inner: TextSource,
    pending: Option<(f64, Option<f64>)>,
    /// An error found after good samples, returned by the next read.
    failed: Option<FftdError>,
}

impl PrimedTextSource {
    pub fn open(mut inner: TextSource) -> Result<Self> {
        let pending = inner.detect_kind()?;
        if pending.is_none() {
            let what = if inner.saw_lines {
                "contains no samples (only blank lines or # comments)"
            } else {
                "is empty"
            };
            return Err(FftdError::input(inner.info.name.clone(), what));
        }
        Ok(PrimedTextSource {
            inner,
            pending,
            failed: None,
        })
    }

    fn push(&self, out: &mut Vec<f64>, sample: (f64, Option<f64>)) -> Result<()> {
        match (self.inner.kind, sample) {
            (Some(InputKind::Complex), (re, Some(im))) => {
                out.push(re);
                out.push(im);
                Ok(())
            }
            (Some(InputKind::Real), (re, None)) => {
                out.push(re);
                Ok(())
            }
            (Some(InputKind::Complex), _) => Err(self.inner.error(
                "expected two numbers (re im): the first sample line made this a complex signal"
                    .to_string(),
            )),
            _ => Err(self.inner.error(
                "expected one number: the first sample line made this a real signal".to_string(),
            )),
        }
    }
}

impl SampleSource for PrimedTextSource {
    fn info(&self) -> &SourceInfo {
        &self.inner.info
    }

    fn read(&mut self, out: &mut Vec<f64>, max_frames: usize) -> Result<usize> {
        // an error found after good samples in the last call: those went first
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut read = 0;
        if let Some(sample) = self.pending.take() {
            self.push(out, sample)?;
            read += 1;
        }
        while read < max_frames {
            // from stdin, hand on what has arrived rather than wait for a full block
            if read > 0 && self.inner.reader.drained() {
                break;
            }
            let next = self
                .inner
                .next_sample()
                .and_then(|s| s.map(|sample| self.push(out, sample)).transpose());
            match next {
                Ok(Some(())) => read += 1,
                Ok(None) => break,
                // the samples before a bad line are analysed; the error comes with the next read
                Err(e) if read > 0 => {
                    self.failed = Some(e);
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        self.inner.samples += read as u64;
        Ok(read)
    }
}
