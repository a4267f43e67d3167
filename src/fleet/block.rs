//! Sample blocks: what `fftd publish` puts on the work stream and a worker takes off it.
//!
//! A block holds every sample of a run of consecutive frames of one stream: frames
//! `first .. first + frames`, samples `[first·hop, (first + frames − 1)·hop + n)` — clipped to the
//! end of the stream, so a worker zero-pads what is missing exactly as the local framer pads the
//! tail frame. Overlap (hop < n) is repeated across blocks; every block is framed on its own.
//! The publisher has applied `--tail pad|drop` when it chose how many frames there are.
//!
//! Headers (all text): `fftd-source` (source id), `fftd-run` (publish run id), `fftd-stream`
//! (stream number, as a local run numbers its streams), `fftd-channel` (when one channel of
//! several), `fftd-rate` (Hz), `fftd-kind` (`real`|`complex`), `fftd-n`, `fftd-hop`,
//! `fftd-first-frame`, `fftd-frames`, `fftd-offset` (sample index of the first sample = first·hop),
//! `fftd-samples` (samples in the payload), `fftd-tail`, `fftd-end: 1` on a stream's last block; `Nats-Msg-Id` (`ids::Origin::block_id`)
//! so a publisher's retry is deduplicated. Payload: little-endian float32 samples (re, im
//! interleaved for complex).

use super::ids::{check_id, Origin};
use crate::frame::Tail;
use crate::types::InputKind;
use async_nats::HeaderMap;

/// Frames in one block at most (`fftd publish --block-frames` stays below).
pub(crate) const MAX_BLOCK_FRAMES: usize = 65536;

/// What every block of one stream shares: where it comes from and how it is framed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StreamShape {
    pub source: String,
    /// The publish run (`ids`): a source published again is a new run.
    pub run: String,
    pub stream: usize,
    pub channel: Option<usize>,
    pub rate: f64,
    pub kind: InputKind,
    pub n: usize,
    pub hop: usize,
    pub tail: Tail,
}

impl StreamShape {
    /// Where this stream's messages on `subject` belong, for their dedup ids.
    pub(crate) fn origin<'a>(&'a self, subject: &'a str) -> Origin<'a> {
        Origin {
            subject,
            source: &self.source,
            run: &self.run,
            stream: self.stream,
        }
    }
}

/// One block: its stream and which of its frames it holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BlockHeader {
    pub shape: StreamShape,
    pub first_frame: u64,
    pub frames: usize,
    /// Samples (not values) in the payload.
    pub samples: usize,
    /// The stream's last block (header `fftd-end: 1`): a worker averaging with `--average` may
    /// emit a partial last group only here.
    pub last: bool,
}

impl BlockHeader {
    /// Sample index of the block's first sample.
    pub(crate) fn offset(&self) -> u64 {
        self.first_frame * self.shape.hop as u64
    }

    /// A name for messages: `block source/stream (frames a..b)`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "block {}/{} (frames {}..{})",
            self.shape.source,
            self.shape.stream,
            self.first_frame,
            self.first_frame + self.frames as u64
        )
    }

    /// The headers of the block published on `subject`.
    pub(crate) fn to_headers(&self, subject: &str) -> HeaderMap {
        let s = &self.shape;
        let mut h = HeaderMap::new();
        h.insert("fftd-source", s.source.as_str());
        h.insert("fftd-run", s.run.as_str());
        h.insert("fftd-stream", s.stream.to_string().as_str());
        if let Some(c) = s.channel {
            h.insert("fftd-channel", c.to_string().as_str());
        }
        let rate = crate::types::number::text(s.rate, crate::types::number::Syntax::Text);
        h.insert("fftd-rate", rate.as_str());
        h.insert("fftd-kind", kind_name(s.kind));
        h.insert("fftd-n", s.n.to_string().as_str());
        h.insert("fftd-hop", s.hop.to_string().as_str());
        h.insert("fftd-first-frame", self.first_frame.to_string().as_str());
        h.insert("fftd-frames", self.frames.to_string().as_str());
        h.insert("fftd-offset", self.offset().to_string().as_str());
        h.insert("fftd-samples", self.samples.to_string().as_str());
        let tail = match s.tail {
            Tail::Pad => "pad",
            Tail::Drop => "drop",
        };
        h.insert("fftd-tail", tail);
        if self.last {
            h.insert("fftd-end", "1");
        }
        let id = s.origin(subject).block_id(self.first_frame, self.frames);
        h.insert("Nats-Msg-Id", id.as_str());
        h
    }

    /// Reads the headers back; the error names the first missing or bad one.
    pub(crate) fn from_headers(h: Option<&HeaderMap>) -> Result<BlockHeader, String> {
        let h = h.ok_or("no fftd headers (not a block from fftd publish)")?;
        let text = |name: &str| {
            h.get(name).map(|v| v.as_str().to_string()).ok_or(format!(
                "header {name} missing (not a block from this version of fftd publish?)"
            ))
        };
        fn number<V: std::str::FromStr>(name: &str, v: String) -> Result<V, String> {
            v.trim()
                .parse()
                .map_err(|_| format!("header {name}: bad value '{v}'"))
        }
        let kind = match text("fftd-kind")?.as_str() {
            "real" => InputKind::Real,
            "complex" => InputKind::Complex,
            other => return Err(format!("header fftd-kind: bad value '{other}'")),
        };
        let tail = match text("fftd-tail")?.as_str() {
            "drop" => Tail::Drop,
            _ => Tail::Pad,
        };
        let channel = match h.get("fftd-channel") {
            Some(v) => Some(number("fftd-channel", v.as_str().to_string())?),
            None => None,
        };
        let shape = StreamShape {
            source: text("fftd-source")?,
            run: text("fftd-run")?,
            stream: number("fftd-stream", text("fftd-stream")?)?,
            channel,
            rate: number("fftd-rate", text("fftd-rate")?)?,
            kind,
            n: number("fftd-n", text("fftd-n")?)?,
            hop: number("fftd-hop", text("fftd-hop")?)?,
            tail,
        };
        let header = BlockHeader {
            shape,
            first_frame: number("fftd-first-frame", text("fftd-first-frame")?)?,
            frames: number("fftd-frames", text("fftd-frames")?)?,
            samples: number("fftd-samples", text("fftd-samples")?)?,
            last: h.get("fftd-end").is_some_and(|v| v.as_str() == "1"),
        };
        header.check()?;
        Ok(header)
    }

    /// Values that would make framing meaningless or unbounded.
    fn check(&self) -> Result<(), String> {
        let s = &self.shape;
        check_id("header fftd-source", &s.source)?;
        check_id("header fftd-run", &s.run)?;
        if !(s.rate.is_finite() && s.rate > 0.0) {
            return Err(format!(
                "header fftd-rate: {} is not a positive rate",
                s.rate
            ));
        }
        if s.n < 2 || s.hop == 0 || self.frames == 0 {
            return Err("headers fftd-n/fftd-hop/fftd-frames: empty framing".into());
        }
        if (self.first_frame).checked_add(self.frames as u64).is_none() {
            return Err(format!("{}: frame numbers past 2^64", self.describe()));
        }
        // a worker frames a block in one buffer: a header claiming more would exhaust it
        let values = (self.frames as u64).checked_mul(s.n as u64);
        if self.frames > MAX_BLOCK_FRAMES
            || values.is_none_or(|v| v > crate::limits::MAX_BATCH_SAMPLES as u64)
        {
            return Err(format!(
                "{}: {} frames of {} samples, more than a worker frames at once",
                self.describe(),
                self.frames,
                s.n
            ));
        }
        let span = (self.frames as u64 - 1)
            .checked_mul(s.hop as u64)
            .and_then(|v| v.checked_add(s.n as u64))
            .ok_or_else(|| format!("{}: frames span past 2^64 samples", self.describe()))?;
        if self.samples as u64 > span {
            return Err(format!(
                "{}: {} samples, more than its frames span ({span})",
                self.describe(),
                self.samples
            ));
        }
        Ok(())
    }
}

pub(crate) fn kind_name(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Real => "real",
        InputKind::Complex => "complex",
    }
}

/// Appends samples (f64 values) as little-endian float32.
pub(crate) fn encode_samples(values: &[f64], out: &mut Vec<u8>) {
    // sized first, then written in place: a loop the compiler vectorises
    let at = out.len();
    out.resize(at + values.len() * 4, 0);
    for (bytes, v) in out[at..].chunks_exact_mut(4).zip(values) {
        bytes.copy_from_slice(&(*v as f32).to_le_bytes());
    }
}

/// The payload's values; the error says when its length disagrees with the header.
pub(crate) fn decode_samples(header: &BlockHeader, payload: &[u8]) -> Result<Vec<f32>, String> {
    let bytes = (header.samples.checked_mul(header.shape.kind.width()))
        .and_then(|values| values.checked_mul(4));
    if bytes != Some(payload.len()) {
        return Err(format!(
            "{}: payload of {} bytes, the header says {} samples ({} bytes)",
            header.describe(),
            payload.len(),
            header.samples,
            bytes.map_or("past 2^64".to_string(), |b| b.to_string())
        ));
    }
    let values: Vec<f32> = (payload.chunks_exact(4))
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    // (`fftd publish` refuses such input, as every local run does: the block was not its)
    if let Some(k) = values.iter().position(|v| !v.is_finite()) {
        return Err(format!(
            "{}: value {k} of its payload is {}, not a finite number",
            header.describe(),
            values[k]
        ));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> BlockHeader {
        BlockHeader {
            shape: StreamShape {
                source: "site 1/mic:a".into(),
                run: "0123456789abcdef".into(),
                stream: 3,
                channel: Some(1),
                rate: 48_000.0,
                kind: InputKind::Complex,
                n: 512,
                hop: 128,
                tail: Tail::Drop,
            },
            first_frame: 32,
            frames: 16,
            samples: 15 * 128 + 512,
            last: true,
        }
    }

    #[test]
    fn headers_read_back_as_written() {
        let h = header();
        let map = h.to_headers("frames.x");
        assert_eq!(BlockHeader::from_headers(Some(&map)), Ok(h.clone()));
        let id = map.get("Nats-Msg-Id").expect("id").as_str().to_string();
        assert_eq!(id, "frames.x:site 1%2Fmic%3Aa/0123456789abcdef/3/b32+16");
        assert_eq!(map.get("fftd-offset").expect("offset").as_str(), "4096");
    }

    #[test]
    fn bad_headers_are_named() {
        let mut map = header().to_headers("frames.x");
        map.insert("fftd-run", "");
        let e = BlockHeader::from_headers(Some(&map)).expect_err("empty run");
        assert!(e.contains("fftd-run"), "{e}");
        let mut h = header();
        h.samples += 1;
        let e = BlockHeader::from_headers(Some(&h.to_headers("f"))).expect_err("too many");
        assert!(e.contains("more than its frames span"), "{e}");
        let mut h = header();
        h.frames = MAX_BLOCK_FRAMES + 1;
        assert!(BlockHeader::from_headers(Some(&h.to_headers("f"))).is_err());
        let mut h = header();
        h.first_frame = u64::MAX;
        let e = BlockHeader::from_headers(Some(&h.to_headers("f"))).expect_err("wraps");
        assert!(e.contains("frame numbers past 2^64"), "{e}");
    }

    #[test]
    fn a_payload_is_never_matched_by_a_size_that_wraps() {
        // 2^62 complex samples are 2^65 bytes: 0 in 64 bits, the length of an empty payload
        let mut h = header();
        h.frames = 2;
        h.shape.hop = 1 << 62;
        h.samples = 1 << 62;
        let e = decode_samples(&h, &[]).expect_err("an empty payload");
        assert!(e.contains("past 2^64"), "{e}");
        assert_eq!(
            decode_samples(&header(), &[0; 8]).map(|v| v.len()).ok(),
            None
        );
        let mut nan = vec![0u8; header().samples * 2 * 4];
        nan[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
        let e = decode_samples(&header(), &nan).expect_err("a NaN");
        assert!(e.contains("value 2 of its payload is NaN"), "{e}");
        let whole = vec![0u8; header().samples * 2 * 4];
        assert_eq!(
            decode_samples(&header(), &whole).map(|v| v.len()),
            Ok(header().samples * 2)
        );
    }
}
