//! Sample blocks: what `fftd publish` puts on the work stream and a worker takes off it.
//!
//! A block holds every sample of a run of consecutive frames of one stream: frames
//! `first .. first + frames`, samples `[first·hop, (first + frames − 1)·hop + n)` — clipped to the
//! end of the stream, so a worker zero-pads what is missing exactly as the local framer pads the
//! tail frame. Overlap (hop < n) is repeated across blocks; every block is framed on its own.
//! The publisher has applied `--tail pad|drop` when it chose how many frames there are.
//!
//! Headers (all text): `fftd-source` (source id), `fftd-stream` (stream number, as a local run
//! numbers its streams), `fftd-channel` (when one channel of several), `fftd-rate` (Hz),
//! `fftd-kind` (`real`|`complex`), `fftd-n`, `fftd-hop`, `fftd-first-frame`, `fftd-frames`,
//! `fftd-offset` (sample index of the first sample = first·hop), `fftd-samples` (samples in the
//! payload), `fftd-tail`; `Nats-Msg-Id: <source>/<stream>/b<first>` so a publisher's retry is
//! deduplicated. Payload: little-endian float32 samples (re, im interleaved for complex).

use crate::fft::InputKind;
use crate::frame::Tail;
use async_nats::HeaderMap;

/// Frames in one block at most (`fftd publish --block-frames` stays below).
pub const MAX_BLOCK_FRAMES: usize = 65536;

/// Where a block's frames come from and how they are cut.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockHeader {
    pub source: String,
    pub stream: usize,
    pub channel: Option<usize>,
    pub rate: f64,
    pub kind: InputKind,
    pub n: usize,
    pub hop: usize,
    pub first_frame: u64,
    pub frames: usize,
    /// Samples (not values) in the payload.
    pub samples: usize,
    pub tail: Tail,
}

impl BlockHeader {
    /// Sample index of the block's first sample.
    pub fn offset(&self) -> u64 {
        self.first_frame * self.hop as u64
    }

    /// The deduplication id of the block on the work stream.
    pub fn message_id(&self) -> String {
        format!("{}/{}/b{}", self.source, self.stream, self.first_frame)
    }

    /// A name for messages: `source/stream frames a..b`.
    pub fn describe(&self) -> String {
        format!(
            "block {}/{} (frames {}..{})",
            self.source,
            self.stream,
            self.first_frame,
            self.first_frame + self.frames as u64
        )
    }

    pub fn to_headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("fftd-source", self.source.as_str());
        h.insert("fftd-stream", self.stream.to_string().as_str());
        if let Some(c) = self.channel {
            h.insert("fftd-channel", c.to_string().as_str());
        }
        h.insert("fftd-rate", ryu::Buffer::new().format(self.rate));
        h.insert("fftd-kind", kind_name(self.kind));
        h.insert("fftd-n", self.n.to_string().as_str());
        h.insert("fftd-hop", self.hop.to_string().as_str());
        h.insert("fftd-first-frame", self.first_frame.to_string().as_str());
        h.insert("fftd-frames", self.frames.to_string().as_str());
        h.insert("fftd-offset", self.offset().to_string().as_str());
        h.insert("fftd-samples", self.samples.to_string().as_str());
        let tail = match self.tail {
            Tail::Pad => "pad",
            Tail::Drop => "drop",
        };
        h.insert("fftd-tail", tail);
        h.insert("Nats-Msg-Id", self.message_id().as_str());
        h
    }

    /// Reads the headers back; the error names the first missing or bad one.
    pub fn from_headers(h: Option<&HeaderMap>) -> Result<BlockHeader, String> {
        let h = h.ok_or("no fftd headers (not a block from fftd publish)")?;
        let text = |name: &str| {
            h.get(name).map(|v| v.as_str().to_string()).ok_or(format!(
                "header {name} missing (not a block from fftd publish?)"
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
        let header = BlockHeader {
            source: text("fftd-source")?,
            stream: number("fftd-stream", text("fftd-stream")?)?,
            channel,
            rate: number("fftd-rate", text("fftd-rate")?)?,
            kind,
            n: number("fftd-n", text("fftd-n")?)?,
            hop: number("fftd-hop", text("fftd-hop")?)?,
            first_frame: number("fftd-first-frame", text("fftd-first-frame")?)?,
            frames: number("fftd-frames", text("fftd-frames")?)?,
            samples: number("fftd-samples", text("fftd-samples")?)?,
            tail,
        };
        header.check()?;
        Ok(header)
    }

    /// Values that would make framing meaningless or unbounded.
    fn check(&self) -> Result<(), String> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!(
                "header fftd-rate: {} is not a positive rate",
                self.rate
            ));
        }
        if self.n < 2 || self.hop == 0 || self.frames == 0 {
            return Err("headers fftd-n/fftd-hop/fftd-frames: empty framing".into());
        }
        // a worker frames a block in one buffer: a header claiming more would exhaust it
        let values = (self.frames as u64).checked_mul(self.n as u64);
        if self.frames > MAX_BLOCK_FRAMES
            || values.is_none_or(|v| v > crate::limits::MAX_BATCH_SAMPLES as u64)
        {
            return Err(format!(
                "{}: {} frames of {} samples, more than a worker frames at once",
                self.describe(),
                self.frames,
                self.n
            ));
        }
        let span = (self.frames as u64 - 1)
            .checked_mul(self.hop as u64)
            .and_then(|s| s.checked_add(self.n as u64))
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

pub fn kind_name(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Real => "real",
        InputKind::Complex => "complex",
    }
}

/// Appends samples (f64 values) as little-endian float32.
pub fn encode_samples(values: &[f64], out: &mut Vec<u8>) {
    out.reserve(values.len() * 4);
    for v in values {
        out.extend_from_slice(&(*v as f32).to_le_bytes());
    }
}

/// The payload's values; the error says when its length disagrees with the header.
pub fn decode_samples(header: &BlockHeader, payload: &[u8]) -> Result<Vec<f32>, String> {
    let values = header.samples * header.kind.width();
    if payload.len() != values * 4 {
        return Err(format!(
            "{}: payload of {} bytes, the header says {} samples ({} bytes)",
            header.describe(),
            payload.len(),
            header.samples,
            values * 4
        ));
    }
    Ok(payload
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}
