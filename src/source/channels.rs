//! Channel selection (`--channel mix|N|all`): turns a source's interleaved sample frames into the
//! per-stream sample sequences fftd analyses. `mix` averages the channels into one stream, `N`
//! keeps channel N (0-based), `all` makes each channel its own stream.

use crate::error::{FftdError, Result};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelSelect {
    Mix,
    Index(usize),
    All,
}

impl FromStr for ChannelSelect {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "mix" => Ok(ChannelSelect::Mix),
            "all" => Ok(ChannelSelect::All),
            _ => s.parse().map(ChannelSelect::Index).map_err(|_| {
                format!("invalid channel '{s}': expected mix, all or a 0-based channel number")
            }),
        }
    }
}

impl fmt::Display for ChannelSelect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelSelect::Mix => f.write_str("mix"),
            ChannelSelect::All => f.write_str("all"),
            ChannelSelect::Index(i) => write!(f, "{i}"),
        }
    }
}

/// Splits interleaved blocks into streams.
pub(crate) struct ChannelSplitter {
    select: ChannelSelect,
    channels: usize,
    /// Values per sample (1 real, 2 complex).
    width: usize,
}

impl ChannelSplitter {
    pub(crate) fn new(
        source: &str,
        select: ChannelSelect,
        channels: usize,
        width: usize,
    ) -> Result<Self> {
        if let ChannelSelect::Index(i) = select {
            if i >= channels {
                return Err(FftdError::Usage(format!(
                    "--channel {i}: {source} has {channels} channel{} (0..{})",
                    if channels == 1 { "" } else { "s" },
                    channels - 1
                )));
            }
        }
        Ok(ChannelSplitter {
            select,
            channels,
            width,
        })
    }

    /// The splitter for a source described by `info`.
    pub(crate) fn for_source(info: &super::SourceInfo, select: ChannelSelect) -> Result<Self> {
        Self::new(&info.name, select, info.channels, info.kind.width())
    }

    /// How many streams this source becomes.
    pub(crate) fn streams(&self) -> usize {
        match self.select {
            ChannelSelect::All => self.channels,
            _ => 1,
        }
    }

    /// The channel a stream carries (None for a mix).
    pub(crate) fn channel_of(&self, stream: usize) -> Option<usize> {
        match self.select {
            ChannelSelect::All => Some(stream),
            ChannelSelect::Index(i) => Some(i),
            ChannelSelect::Mix => None,
        }
    }

    /// Splits `block` (whole sample frames) into `out[stream]`, clearing each first. A
    /// one-channel block is moved, not copied: `block` is left holding a spare buffer.
    pub(crate) fn split(&self, block: &mut Vec<f64>, out: &mut [Vec<f64>]) {
        out.iter_mut().for_each(Vec::clear);
        let (c, w) = (self.channels, self.width);
        if c == 1 {
            std::mem::swap(block, &mut out[0]);
            return;
        }
        match self.select {
            ChannelSelect::Mix => {
                let inv = 1.0 / c as f64;
                for frame in block.chunks_exact(c * w) {
                    for part in 0..w {
                        let sum: f64 = (0..c).map(|ch| frame[ch * w + part]).sum();
                        out[0].push(sum * inv);
                    }
                }
            }
            ChannelSelect::Index(i) => {
                for frame in block.chunks_exact(c * w) {
                    out[0].extend_from_slice(&frame[i * w..(i + 1) * w]);
                }
            }
            ChannelSelect::All => {
                for frame in block.chunks_exact(c * w) {
                    for (ch, stream) in out.iter_mut().enumerate() {
                        stream.extend_from_slice(&frame[ch * w..(ch + 1) * w]);
                    }
                }
            }
        }
    }
}
