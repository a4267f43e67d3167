//! The command line over the config file: `merge` fills every option the flags left unset from
//! the file, and `from_file` says which keys the file gave, so an error about one is placed in
//! the file (`config_file`).

use super::options::Options;

/// Every `Option` field of `Options`, handed to the macro `$then`: one list for `merge`, which
/// takes each from the CLI first, and `from_file`, which says which the file gave.
macro_rules! optional_fields {
    ($then:ident) => {
        $then!(
            mic,
            input_format,
            rate,
            center_freq,
            gain,
            sweep,
            crop,
            settle,
            sweeps,
            channels,
            channel,
            frame,
            hop,
            tail,
            window,
            scale,
            average,
            average_mode,
            fmin,
            fmax,
            bands,
            calibration,
            calibration_file,
            weighting,
            unit,
            peaks,
            tone,
            cross,
            precision,
            format,
            output,
            output_dir,
            png_size,
            png_db,
            meta,
            trace,
            max_frames,
            duration,
            device,
            batch,
            max_latency,
            workers,
            serve,
            serve_max_connections,
            serve_token,
            serve_token_file,
            serve_tls_cert,
            serve_tls_key,
            idle_exit,
            rotate, // issue 27
            events,
            record_on_alert,
            pre,
            post,
            retry,
            rows_per_message // issue 28
        )
    };
}

/// `file` without its input (the `file` and `mic` keys) when the command line names one: the
/// input is one choice, so a config file that sets `mic` serves a run on `--file` too (before:
/// "use either --file or --mic").
pub(super) fn input_from_the_command_line(cli: &Options, file: Options) -> Options {
    match cli.file.is_empty() && cli.mic.is_none() {
        true => file,
        false => Options {
            file: Vec::new(),
            mic: None,
            ..file
        },
    }
}

/// Fills every unset field of `cli` from `file`. Flags (`fftshift`, `stats`) are on when either is.
pub(super) fn merge(cli: Options, file: Options) -> Options {
    macro_rules! pick {
        ($($field:ident),*) => {
            Options {
                file: if cli.file.is_empty() { file.file } else { cli.file },
                fftshift: cli.fftshift || file.fftshift,
                levels: cli.levels || file.levels,
                distortion: cli.distortion || file.distortion,
                stats: cli.stats || file.stats,
                quiet: cli.quiet || file.quiet,
                realtime: cli.realtime || file.realtime,
                dc_remove: cli.dc_remove || file.dc_remove,
                serve_allow_origin: if cli.serve_allow_origin.is_empty() { file.serve_allow_origin } else { cli.serve_allow_origin },
                serve_allow_host: if cli.serve_allow_host.is_empty() { file.serve_allow_host } else { cli.serve_allow_host },
                alert: if cli.alert.is_empty() { file.alert } else { cli.alert }, // issue 27
                $($field: cli.$field.or(file.$field),)*
            }
        };
    }
    optional_fields!(pick)
}

/// The config keys (kebab-case) whose values `merge(cli, file)` takes from `file`: set there and
/// not by a flag. A usage error about one of them names the file and line (`config_file`).
pub(super) fn from_file(cli: &Options, file: &Options) -> Vec<String> {
    let mut keys: Vec<&str> = Vec::new();
    macro_rules! note {
        ($($field:ident),*) => {
            $(if cli.$field.is_none() && file.$field.is_some() {
                keys.push(stringify!($field));
            })*
        };
    }
    optional_fields!(note);
    let lists = [
        ("file", cli.file.is_empty(), file.file.is_empty()),
        (
            "serve_allow_origin",
            cli.serve_allow_origin.is_empty(),
            file.serve_allow_origin.is_empty(),
        ),
        (
            "serve_allow_host",
            cli.serve_allow_host.is_empty(),
            file.serve_allow_host.is_empty(),
        ),
        ("alert", cli.alert.is_empty(), file.alert.is_empty()),
    ];
    keys.extend(lists.iter().filter(|(_, c, f)| *c && !f).map(|l| l.0));
    let switches = [
        ("fftshift", cli.fftshift, file.fftshift),
        ("levels", cli.levels, file.levels),
        ("distortion", cli.distortion, file.distortion),
        ("stats", cli.stats, file.stats),
        ("quiet", cli.quiet, file.quiet),
        ("realtime", cli.realtime, file.realtime),
        ("dc_remove", cli.dc_remove, file.dc_remove),
    ];
    keys.extend(switches.iter().filter(|(_, c, f)| !c && *f).map(|s| s.0));
    keys.iter().map(|k| k.replace('_', "-")).collect()
}
