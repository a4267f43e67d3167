//! A config file's keys that only shape a mode the run does not use, left out of that run: one
//! file serves runs of every kind (README "Safety of your files"), so `png-size` waits for a PNG
//! run and `pre`/`post` for one that records, instead of refusing every other run. Only the
//! file's keys are left out: the same flag on the command line is the user asking for it, and
//! is refused as before with the reason ("--tone HZ picks --distortion's fundamental"). A mode
//! counts as used when the command line or the file turns it on.

use super::merge::merge;
use super::options::Options;
use crate::sink::OutputFormat;
use crate::source::spec::is_receiver;
use crate::types::nats_url::is_nats_url;

/// A step of `left_out`: whether the run (the command line merged over the file, as left so
/// far) uses the mode, and how to clear the file's keys that only serve it.
type Step = (fn(&Options) -> bool, fn(&mut Options));

/// The steps in the order their modes hang on each other: a sweep needs a receiver, and its
/// `crop` needs the sweep; `pre`/`post` need `record-on-alert`, which needs alerts.
const STEPS: [Step; 13] = [
    (reads_a_receiver, |f| (f.gain, f.sweep) = (None, None)),
    (
        |o| o.sweep.is_some(),
        |f| (f.crop, f.settle, f.sweeps) = (None, None, None),
    ),
    (
        |o| o.file.iter().any(|p| is_nats_url(p)),
        |f| f.idle_exit = None,
    ),
    (
        |o| output_text(o).is_some_and(is_nats_url),
        |f| f.rows_per_message = None,
    ),
    (|o| o.serve.is_some(), clear_serve_keys),
    (
        |o| o.format == Some(OutputFormat::Png),
        |f| (f.png_size, f.png_db) = (None, None),
    ),
    (writes_files, |f| f.rotate = None),
    (|o| !o.alert.is_empty(), |f| f.record_on_alert = None),
    (
        |o| !o.alert.is_empty() || o.retry.is_some(),
        |f| f.events = None,
    ),
    (
        |o| o.record_on_alert.is_some(),
        |f| (f.pre, f.post) = (None, None),
    ),
    (|o| o.distortion, |f| f.tone = None),
    (calibrated, |f| f.unit = None),
    (|o| o.average.is_some(), |f| f.average_mode = None),
];

/// `file` without the keys of the modes that `cli` merged over it does not use (`STEPS`).
pub(super) fn left_out(cli: &Options, mut file: Options) -> Options {
    for (used, clear) in STEPS {
        if !used(&merge(cli.clone(), file.clone())) {
            clear(&mut file);
        }
    }
    file
}

fn reads_a_receiver(o: &Options) -> bool {
    o.mic.is_none() && o.file.iter().any(|p| is_receiver(p))
}

fn output_text(o: &Options) -> Option<&str> {
    o.output.as_deref().and_then(|p| p.to_str())
}

/// Rows go to files (`--output FILE` or `--output-dir`), which `--rotate` splits.
fn writes_files(o: &Options) -> bool {
    let to_file = o
        .output
        .as_deref()
        .is_some_and(crate::sink::rotate::is_output_file);
    to_file || o.output_dir.is_some()
}

/// Levels are calibrated (`--unit` names their unit).
fn calibrated(o: &Options) -> bool {
    o.calibration.is_some() || o.calibration_file.is_some()
}

fn clear_serve_keys(f: &mut Options) {
    f.serve_max_connections = None;
    f.serve_token = None;
    f.serve_token_file = None;
    f.serve_tls_cert = None;
    f.serve_tls_key = None;
    f.serve_allow_origin.clear();
    f.serve_allow_host.clear();
}
