//! What the source stage is given: where the signal comes from and how to read it (built by
//! `app` from the command line and config file).

use super::channels::ChannelSelect;
use super::rtl_tcp::Gain;
use super::InputFormat;
use crate::types::nats_url::NatsUrl;

/// Where the signal comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Files(Vec<String>),
    /// Live capture; the string selects the device ("" = default).
    Mic(String),
    /// A fleet worker's work stream (the fleet's own spec says the rest).
    Nats(NatsUrl),
}

/// Whether `path` names a receiver fftd can tune (`rtl_tcp://`, `soapy://`).
pub(crate) fn is_receiver(path: &str) -> bool {
    super::rtl_tcp::is_rtl_tcp(path) || super::soapy::is_soapy(path)
}

impl Input {
    /// The name of the first stream's input, as its stream is named (None: a fleet worker's,
    /// known only from its work).
    pub(crate) fn first_name(&self) -> Option<String> {
        match self {
            Input::Files(files) => files.first().cloned(),
            Input::Mic(id) => Some(format!("mic:{id}")),
            Input::Nats(_) => None,
        }
    }

    /// Whether the input is live (the microphone or a receiver): read as it comes.
    pub fn is_live(&self) -> bool {
        matches!(self, Input::Mic(_)) || self.has_receiver()
    }

    /// Whether an input is a receiver fftd can tune (`rtl_tcp://`, `soapy://`).
    pub(crate) fn has_receiver(&self) -> bool {
        matches!(self, Input::Files(f) if f.iter().any(|p| is_receiver(p)))
    }

    /// Whether some input is read in an `--input-format`: a file or stdin, not the microphone
    /// nor a receiver (each sends its own format).
    pub(crate) fn takes_input_format(&self) -> bool {
        matches!(self, Input::Files(f) if !f.iter().all(|p| is_receiver(p)))
    }

    /// Whether an input is stdin (`--file -`).
    pub(crate) fn reads_stdin(&self) -> bool {
        matches!(self, Input::Files(f) if f.iter().any(|p| p == "-"))
    }

    /// Whether an input is a SoapySDR device.
    pub(crate) fn has_soapy(&self) -> bool {
        matches!(self, Input::Files(f) if f.iter().any(|p| super::soapy::is_soapy(p)))
    }
}

impl Input {
    /// Whether the input is read as it comes for as long as it lasts (a daemon's): the
    /// microphone, an rtl_tcp receiver, stdin, a fleet worker's stream.
    pub fn is_streamed(&self) -> bool {
        match self {
            Input::Files(files) => files.iter().any(|f| f == "-" || f.contains("://")),
            Input::Mic(_) | Input::Nats(_) => true,
        }
    }
}

/// The inputs and how to read them.
#[derive(Clone, Debug)]
pub struct SourceSpec {
    pub input: Input,
    pub input_format: Option<InputFormat>,
    /// Rate given by the user (None: 1 Hz for files, the device rate for the mic, WAV header).
    pub rate: Option<f64>,
    /// `--gain`: an rtl_tcp:// receiver's tuner gain.
    pub gain: Option<Gain>,
    pub channels: Option<usize>,
    pub channel: ChannelSelect,
    /// `--center-freq`: where the input was tuned, Hz (SigMF inputs may say it themselves).
    pub center_freq: Option<f64>,
    /// `--realtime`: file and stdin inputs paced at their sample rate.
    pub realtime: bool,
    /// `--max-frames`: frames read per stream at most.
    pub max_frames: Option<u64>,
    /// `--duration`: seconds read per stream at most.
    pub duration: Option<f64>,
    /// `--retry`: a live input that fails is reopened (issue 27, `retry`).
    pub retry: Option<super::retry_policy::RetryPolicy>,
    /// `--channel N` of a SoapySDR device: its receive channel (the stream has one).
    pub(crate) receiver_channel: usize,
    /// `--sweep`: the receiver retuned hop after hop (issue 42, `sweep`).
    pub(crate) sweep: Option<super::sweep::SweepSchedule>,
}
