//! The sound devices behind `--mic`: picking the device named, choosing a capture format and
//! period it offers, describing what it supports in errors, and the "Audio inputs" section of
//! `fftd devices`.

use super::mic::{FORMAT_ENV, PERIOD_SECONDS};
use super::spec::SourceSpec;
use crate::error::{FftdError, Result};
use cpal::traits::{DeviceTrait, HostTrait};
use cpal::{SampleFormat, StreamConfig, SupportedStreamConfigRange};

/// Formats tried, in order, when the device's default format does not fit the request.
const FORMAT_PREFERENCE: [SampleFormat; 12] = [
    SampleFormat::F32,
    SampleFormat::I16,
    SampleFormat::I32,
    SampleFormat::I24,
    SampleFormat::F64,
    SampleFormat::U16,
    SampleFormat::I8,
    SampleFormat::U8,
    SampleFormat::U32,
    SampleFormat::U24,
    SampleFormat::I64,
    SampleFormat::U64,
];

/// Picks the stream configuration: channels and rate as asked (else the device default), and the
/// device's default format when it fits (else the first of `FORMAT_PREFERENCE` that does).
pub(super) fn choose_config(
    id: &str,
    ranges: &[SupportedStreamConfigRange],
    default: Option<&cpal::SupportedStreamConfig>,
    spec: &SourceSpec,
) -> Result<(StreamConfig, SampleFormat)> {
    let channels = match spec.channels {
        Some(c) => u16::try_from(c).map_err(|_| {
            FftdError::Usage(format!(
                "--channels {c}: too many channels for an audio device"
            ))
        })?,
        None => default.map_or(ranges[0].channels(), |d| d.channels()),
    };
    let rate = match spec.rate {
        Some(r) if r.fract() == 0.0 && r >= 1.0 && r <= f64::from(u32::MAX) => r as u32,
        Some(r) => {
            return Err(FftdError::Usage(format!(
                "--rate {r}: an audio device rate must be a whole number of Hz"
            )))
        }
        None => default.map_or(ranges[0].max_sample_rate(), |d| d.sample_rate()),
    };
    let fits: Vec<&SupportedStreamConfigRange> = ranges
        .iter()
        .filter(|r| r.channels() == channels && r.contains_rate(rate))
        .collect();
    if fits.is_empty() {
        return Err(FftdError::Runtime(format!(
            "audio input '{id}' cannot capture {channels} channel(s) at {rate} Hz; it supports {}",
            summarize(ranges)
        )));
    }
    let offered = |f: SampleFormat| fits.iter().any(|r| r.sample_format() == f);
    let format = match crate::knobs::mic_format() {
        Some(name) => {
            // fftd's file formats say s16 where cpal says i16: accept both.
            let lower = name.to_ascii_lowercase();
            let lower = match lower.strip_prefix('s') {
                Some(bits) if bits.starts_with(|c: char| c.is_ascii_digit()) => format!("i{bits}"),
                _ => lower,
            };
            let wanted = FORMAT_PREFERENCE
                .iter()
                .copied()
                .find(|f| format_name(*f) == lower)
                .ok_or_else(|| {
                    FftdError::Usage(format!(
                        "{FORMAT_ENV}={name}: not a sample format (i8, i16, i24, i32, i64, u8, u16, u24, u32, u64, f32, f64; s16 for i16)"
                    ))
                })?;
            if !offered(wanted) {
                return Err(FftdError::Runtime(format!(
                    "audio input '{id}' cannot capture {name} with {channels} channel(s) at {rate} Hz; it supports {}",
                    summarize(ranges)
                )));
            }
            wanted
        }
        _ => default
            .map(|d| d.sample_format())
            .filter(|f| offered(*f))
            .or_else(|| FORMAT_PREFERENCE.iter().copied().find(|f| offered(*f)))
            .ok_or_else(|| {
                FftdError::Runtime(format!(
                    "audio input '{id}' offers only sample formats fftd cannot read: {}",
                    summarize(ranges)
                ))
            })?,
    };
    let config = StreamConfig {
        channels,
        sample_rate: rate,
        buffer_size: period_for(rate, &fits, format),
    };
    Ok((config, format))
}

/// Frames per callback: about `PERIOD_SECONDS` (a power of two), within what the device allows.
/// Some devices (ALSA's `null`/`file` plugins) default to 1-frame periods, one callback per
/// sample frame; others to periods of a second. `Default` when the device does not say.
pub(super) fn period_for(
    rate: u32,
    fits: &[&SupportedStreamConfigRange],
    format: SampleFormat,
) -> cpal::BufferSize {
    let wanted = ((f64::from(rate) * PERIOD_SECONDS) as u32)
        .max(1)
        .next_power_of_two();
    let range = fits
        .iter()
        .find(|r| r.sample_format() == format)
        .map(|r| *r.buffer_size());
    match range {
        Some(cpal::SupportedBufferSize::Range { min, max }) if min <= max => {
            cpal::BufferSize::Fixed(wanted.clamp(min, max))
        }
        _ => cpal::BufferSize::Default,
    }
}

/// The device for `--mic DEVICE`: "" the default, a number the index in `fftd devices`, else the
/// one device whose id or description contains DEVICE (case-insensitive; an exact match wins).
pub(super) fn pick_device(host: &cpal::Host, wanted: &str) -> Result<cpal::Device> {
    if wanted.is_empty() {
        return host.default_input_device().ok_or_else(|| {
            FftdError::Runtime(
                "no audio input device: this machine has none; use --file PATH to analyse a recording"
                    .into(),
            )
        });
    }
    let devices = input_devices(host);
    let names: Vec<String> = devices.iter().map(device_id).collect();
    let listing = || {
        if names.is_empty() {
            "none".to_string()
        } else {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| format!("{i}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    if let Ok(index) = wanted.parse::<usize>() {
        return devices.into_iter().nth(index).ok_or_else(|| {
            FftdError::Runtime(format!(
                "--mic {wanted}: no audio input with that index (inputs: {})",
                listing()
            ))
        });
    }
    let needle = wanted.to_lowercase();
    let texts: Vec<String> = devices
        .iter()
        .map(|d| format!("{} {}", device_id(d), device_description(d)).to_lowercase())
        .collect();
    if let Some(i) = names.iter().position(|n| n.to_lowercase() == needle) {
        return Ok(devices.into_iter().nth(i).expect("index from position"));
    }
    let matches: Vec<usize> = (0..devices.len())
        .filter(|&i| texts[i].contains(&needle))
        .collect();
    match matches.as_slice() {
        [i] => Ok(devices.into_iter().nth(*i).expect("index from filter")),
        [] => Err(FftdError::Runtime(format!(
            "--mic {wanted}: no audio input matches (inputs: {}); see `fftd devices`, or use --file PATH",
            listing()
        ))),
        several => Err(FftdError::Runtime(format!(
            "--mic {wanted}: matches several audio inputs ({}); give an index or a longer name",
            several
                .iter()
                .map(|&i| format!("{i}: {}", names[i]))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Capture devices in `fftd devices` order: the default first, then every other input the host
/// lists (without opening them).
pub(super) fn input_devices(host: &cpal::Host) -> Vec<cpal::Device> {
    let mut devices: Vec<cpal::Device> = host.default_input_device().into_iter().collect();
    if let Ok(inputs) = host.input_devices() {
        for d in inputs {
            if !devices.contains(&d) {
                devices.push(d);
            }
        }
    }
    devices
}

/// The host's id of a device (an ALSA PCM name such as `default` or `hw:CARD=0,DEV=0`).
pub(super) fn device_id(dev: &cpal::Device) -> String {
    match dev.id() {
        Ok(id) => id.id().to_string(),
        Err(_) => dev.to_string(),
    }
}

pub(super) fn device_description(dev: &cpal::Device) -> String {
    dev.description()
        .map(|d| d.name().to_string())
        .unwrap_or_default()
}

/// The error for a device that cannot be opened for capture, with alsa-lib's reason when it gave
/// one (it is kept off stderr while we open).
pub(super) fn cannot_open(wanted: &str, id: &str, why: &str, quiet: &QuietAlsa) -> FftdError {
    // alsa-lib's own reason ("Unknown PCM default", "cannot find card '0'") says more than
    // cpal's generic one.
    let why = quiet.last_message().unwrap_or_else(|| why.to_string());
    let what = if wanted.is_empty() {
        format!("no audio input device: the default input ('{id}') cannot be opened for capture")
    } else {
        format!("audio input '{id}' cannot be opened for capture")
    };
    FftdError::Runtime(format!(
        "{what}: {why}; use --file PATH to analyse a recording"
    ))
}

/// Lower-case name of a sample format, as `fftd devices` and `FFTD_MIC_FORMAT` spell it.
pub(super) fn format_name(f: SampleFormat) -> String {
    f.to_string().to_lowercase()
}

/// "formats f32, i16; 1-2 channels; 8000-192000 Hz" for a device's configuration ranges.
pub(super) fn summarize(ranges: &[SupportedStreamConfigRange]) -> String {
    let mut formats: Vec<String> = Vec::new();
    let mut channels: Vec<u16> = Vec::new();
    let mut rates: Vec<(u32, u32)> = Vec::new();
    for r in ranges {
        if !FORMAT_PREFERENCE.contains(&r.sample_format()) {
            continue; // DSD and the like: fftd cannot read them
        }
        let f = format_name(r.sample_format());
        if !formats.contains(&f) {
            formats.push(f);
        }
        if !channels.contains(&r.channels()) {
            channels.push(r.channels());
        }
        let span = (r.min_sample_rate(), r.max_sample_rate());
        if !rates.contains(&span) {
            rates.push(span);
        }
    }
    channels.sort_unstable();
    rates.sort_unstable();
    let rates: Vec<String> = rates
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect();
    format!(
        "formats {}; {} channel(s); {} Hz",
        formats.join(", "),
        compress_runs(&channels),
        rates.join(", ")
    )
}

/// "1-2, 4, 6-8" for a sorted list of numbers.
pub(super) fn compress_runs(values: &[u16]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let start = values[i];
        let mut end = start;
        while i + 1 < values.len() && values[i + 1] == end + 1 {
            i += 1;
            end = values[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

/// The "Audio inputs" section of `fftd devices`: index, id and description of each capture
/// device, with the formats, channel counts and rates it supports (or why it cannot be opened).
pub(crate) fn describe_inputs() -> String {
    let quiet = QuietAlsa::install();
    let host = cpal::default_host();
    let mut text = format!("Audio inputs ({}):\n", host.id().name());
    let devices = input_devices(&host);
    if devices.is_empty() {
        text.push_str("  none\n");
    }
    for (i, dev) in devices.iter().enumerate() {
        let id = device_id(dev);
        let desc = device_description(dev);
        if desc.is_empty() || desc == id {
            text.push_str(&format!("  {i}: {id}\n"));
        } else {
            text.push_str(&format!("  {i}: {id} ({desc})\n"));
        }
        let line = match dev.supported_input_configs() {
            Ok(r) => {
                let ranges: Vec<_> = r.collect();
                if ranges.is_empty() {
                    "no capture configuration".to_string()
                } else {
                    let default = dev
                        .default_input_config()
                        .map(|d| {
                            format!(
                                "; default {}, {} ch, {} Hz",
                                format_name(d.sample_format()),
                                d.channels(),
                                d.sample_rate()
                            )
                        })
                        .unwrap_or_default();
                    format!("{}{default}", summarize(&ranges))
                }
            }
            Err(e) => {
                let alsa = quiet
                    .last_message()
                    .map(|m| format!(" (ALSA: {m})"))
                    .unwrap_or_default();
                format!("cannot be opened for capture: {e}{alsa}")
            }
        };
        text.push_str(&format!("     {line}\n"));
    }
    text
}

/// Keeps alsa-lib's own error messages (e.g. `ALSA lib confmisc.c:855:(parse_card) cannot find
/// card '0'`) off stderr on this thread while it lives; fftd reports the failure in one line.
pub(super) struct QuietAlsa {
    #[cfg(target_os = "linux")]
    output: Option<std::rc::Rc<std::cell::RefCell<alsa::Output>>>,
}

impl QuietAlsa {
    pub(super) fn install() -> Self {
        QuietAlsa {
            #[cfg(target_os = "linux")]
            output: alsa::Output::local_error_handler().ok(),
        }
    }

    /// The last message alsa-lib gave, without its source-location prefix.
    fn last_message(&self) -> Option<String> {
        #[cfg(target_os = "linux")]
        {
            let text = self.output.as_ref()?.borrow().to_string();
            for line in text.lines().rev() {
                tracing::debug!("alsa-lib: {line}");
            }
            let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
            // "parse_card: cannot find card '0'" → "cannot find card '0'"
            let message = last.split_once(": ").map_or(last, |(_, m)| m);
            Some(message.trim().to_string())
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }
}
