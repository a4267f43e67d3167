//! fftd's entry point: parse the command line, set up logging and signals, run, and turn any error
//! into one line on stderr and an exit code (0 ok, 1 runtime error, 2 usage error).

use fftd::app::cli::{Cli, Command};
use fftd::app::config::Settings;
use fftd::error::FftdError;
use std::io::Write;
use std::process::ExitCode;

/// Notes which standard streams the shell closed while the program loads, before Rust's
/// runtime opens /dev/null on them (`fftd::stdio`). An ELF constructor: it runs before `main`
/// and before std's start-up, so `note_closed_streams` uses nothing but `fcntl` and atomics and
/// cannot panic (a panic there would abort).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STREAMS: extern "C" fn() = fftd::stdio::note_closed_streams;

fn main() -> ExitCode {
    fftd::left_behind::started();
    let cli = match fftd::app::cli::parse() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    init_tracing();
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("fftd: {}", fftd::error::shorten_echoes(&e.to_string()));
            e.exit_code() as u8
        }
    };
    // a device start-up the run left behind is not waited for (issue 23)
    fftd::left_behind::exit(code)
}

fn run(cli: Cli) -> Result<(), FftdError> {
    match cli.command {
        Some(Command::Devices) => fftd::devices::print_devices(),
        Some(Command::Check(args)) => {
            if args.options.file.is_empty() && args.own.config.is_none() {
                // (a run's message names --mic, which check does not take)
                return Err(FftdError::Usage(
                    "no input to check: give --file PATH (repeatable, - for stdin)".into(),
                ));
            }
            // the same config file as a run's: every key checked, the output ones unused
            let config = args.own.config.as_deref();
            let settings =
                Settings::resolve_keys(args.options, config, fftd::app::cli::check_keys)?;
            fftd::check::run_check(&settings, args.own.tolerance)
        }
        Some(Command::Bench(args)) => fftd::bench::run_bench(&args.spec()?),
        Some(Command::Publish(args)) => {
            let signals = fftd::types::Signals::default();
            install_signal_handlers(&signals)?;
            fftd::app::publish::run_publish(
                &args,
                &fftd::app::config::publish_spec(&args)?,
                &signals,
            )
        }
        Some(Command::Fleet(command)) => fftd::app::fleet_args::run_fleet(command),
        Some(Command::BuildPrograms(args)) => args.job().build().map_err(FftdError::Runtime),
        None => {
            let mut settings = Settings::resolve(cli.options, cli.config.as_deref())?;
            // SAFETY: no other thread has started (parsing, logging and settings start none)
            // and OpenCL is not loaded: nothing reads the environment while it changes.
            unsafe { fftd::pipeline::narrow_gpu_view(&settings) };
            let uses_nats = settings.fleet.is_some() || settings.nats_output.is_some();
            cli.nats
                .check_used(uses_nats || settings.run.alerts.events_to_nats())?;
            let nats = cli.nats.spec();
            (settings.run.output.also_read).extend(nats.files_read()); // (never overwritten)
            if let Some(output) = settings.nats_output.as_mut() {
                output.nats = nats.clone();
            }
            settings.run.alerts.nats = fftd::alerts::EventsNats(nats.clone()); // --events nats://
            let signals = fftd::types::Signals::default();
            install_signal_handlers(&signals)?;
            match &settings.fleet {
                Some(io) => run_worker(&settings, io, &nats, &signals),
                None => {
                    if settings.source.input.is_streamed() {
                        fftd::heap::no_huge_pages(); // memory flat over months (issue 27)
                    }
                    fftd::pipeline::run(&settings, signals).map_err(|e| settings.placed(e))
                }
            }
        }
    }
}

/// A fleet worker until stopped or idle; `--stats` and `--meta` say what it did.
fn run_worker(
    settings: &Settings,
    io: &fftd::fleet::worker::FleetIo,
    nats: &fftd::fleet::connect::NatsArgs,
    signals: &fftd::types::Signals,
) -> Result<(), FftdError> {
    fftd::pipeline::refuse_overwriting_worker_inputs(&settings.run)?;
    let counts = fftd::fleet::worker::run_worker(
        &settings.analysis,
        &settings.engine.device,
        io,
        nats,
        signals,
    )?;
    if settings.report.stats {
        eprintln!(
            "fftd worker: {} blocks, {} samples, {} rows in {} messages to '{}' ({} messages already there)",
            counts.blocks, counts.samples, counts.rows, counts.messages, fftd::types::escaped(&io.subject), counts.duplicates
        );
    }
    if let Some(path) = &settings.output.meta {
        fftd::fleet::write_worker_meta(path, &settings.analysis, io, &counts)?;
    }
    Ok(())
}

/// SIGINT/SIGTERM ask the pipeline to stop reading and drain; a second one exits at once (130),
/// and so does a write stuck on a reader that reads nothing, a second after the first
/// (`stuck_write`): neither run finished.
fn install_signal_handlers(signals: &fftd::types::Signals) -> Result<(), FftdError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let interrupted = &signals.interrupted;
    for signal in [SIGINT, SIGTERM] {
        let second = interrupted.clone();
        // SAFETY: the action runs in a signal handler: an atomic load, and
        // `exit_interrupted`, which is async-signal-safe (unlink(2) and _exit(2) alone).
        unsafe {
            signal_hook::low_level::register(signal, move || {
                if second.load(std::sync::atomic::Ordering::SeqCst) {
                    fftd::types::exit_interrupted();
                }
            })
        }
        .and_then(|_| signal_hook::flag::register(signal, interrupted.clone()))
        .and_then(|_| signal_hook::flag::register(signal, signals.stop.clone()))
        .map_err(|e| FftdError::Runtime(format!("cannot install signal handler: {e}")))?;
    }
    // issue 27: SIGHUP closes and reopens every output file (logrotate)
    signal_hook::flag::register(signal_hook::consts::SIGHUP, signals.reopen.clone())
        .map_err(|e| FftdError::Runtime(format!("cannot install signal handler: {e}")))?;
    fftd::sink::stuck_write::watch(interrupted.clone());
    Ok(())
}

/// Logs go to stderr; `RUST_LOG=fftd=debug` shows per-frame latency. Default: info and above.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("fftd=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| EscapedStderr)
        .with_target(false)
        .without_time()
        .with_ansi(false)
        .try_init();
}

/// stderr for log lines, which quote input (a file's name, a device's, a value): their control
/// characters are written out (`fftd::types::escaped`), so each stays one line. The formatter
/// hands over each line whole, with its newline, in one write.
struct EscapedStderr;

impl Write for EscapedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (line, end) = match text.strip_suffix('\n') {
            Some(line) => (line, "\n"),
            None => (&text[..], ""),
        };
        let line = fftd::types::escaped(line);
        std::io::stderr()
            .lock()
            .write_all(format!("{line}{end}").as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Help and version go to stdout (exit 0); usage errors become one line on stderr (exit 2).
fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::ValueValidation => {
            // "--flag VALUE: what it must be", as the checks made after parsing say it
            let line = match (value_error_parts(&e), std::error::Error::source(&e)) {
                (Some((flag, value)), Some(why)) => {
                    // parsers that name the flag or echo the value already say it once
                    // (as typed, or with its control characters written out, `\n`)
                    let why = why.to_string();
                    let value = fftd::types::escaped(&value).into_owned();
                    let why = why
                        .strip_prefix(&format!("{flag} {value}: "))
                        .unwrap_or(&why);
                    let why = why.strip_prefix(&format!("'{value}': ")).unwrap_or(why);
                    format!("{flag} {value}: {why}")
                }
                _ => one_line(&e),
            };
            eprintln!("fftd: {}", fftd::error::shorten_echoes(&line));
            ExitCode::from(2)
        }
        ErrorKind::InvalidValue => {
            let line = choice_error(&e).unwrap_or_else(|| one_line(&e));
            eprintln!("fftd: {}", fftd::error::shorten_echoes(&line));
            ExitCode::from(2)
        }
        ErrorKind::UnknownArgument => {
            let unknown = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::String(arg)) => arg.clone(),
                _ => String::new(),
            };
            let args: Vec<String> = std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let line = fftd::app::cli::flag_of_another_command(&args, &unknown)
                .unwrap_or_else(|| one_line(&e));
            eprintln!("fftd: {}", fftd::error::shorten_echoes(&line));
            ExitCode::from(2)
        }
        ErrorKind::InvalidUtf8 => {
            let line = non_utf8_argument(std::env::args_os()).unwrap_or_else(|| one_line(&e));
            eprintln!("fftd: {}", fftd::error::shorten_echoes(&line));
            ExitCode::from(2)
        }
        _ => {
            eprintln!("fftd: {}", fftd::error::shorten_echoes(&one_line(&e)));
            ExitCode::from(2)
        }
    }
}

/// The first argument of `args` that is not UTF-8, named with its flag (clap says only "invalid
/// UTF-8 was detected in one or more arguments"). Its bytes are echoed escaped (`\xff`).
fn non_utf8_argument(args: impl Iterator<Item = std::ffi::OsString>) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let args: Vec<_> = args.skip(1).collect();
    let at = args.iter().position(|a| a.to_str().is_none())?;
    let bytes = args[at].as_bytes();
    let echo = |b: &[u8]| b.escape_ascii().to_string();
    let (flag, value) = match bytes.iter().position(|&b| b == b'=') {
        Some(eq) if bytes.starts_with(b"--") => (Some(echo(&bytes[..eq])), &bytes[eq + 1..]),
        _ => (
            at.checked_sub(1)
                .and_then(|p| args[p].to_str())
                .filter(|p| p.starts_with('-'))
                .map(String::from),
            bytes,
        ),
    };
    let why = match flag.as_deref() {
        Some("--file") => "a name that is not UTF-8, which fftd does not take (rename the file, or read it from stdin: --file - < NAME)",
        _ => "not UTF-8 text, which fftd does not take",
    };
    let value = echo(value);
    Some(match flag {
        Some(flag) => format!("{flag} '{value}': {why}"),
        None => format!("argument '{value}': {why}"),
    })
}

/// The flag (`--frame`, without its value name) and the value of a value-validation error.
fn value_error_parts(e: &clap::Error) -> Option<(String, String)> {
    use clap::error::{ContextKind, ContextValue};
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let flag = text(ContextKind::InvalidArg)?;
    let flag = flag
        .split([' ', '='])
        .next()
        .unwrap_or_default()
        .to_string();
    Some((flag, text(ContextKind::InvalidValue)?))
}

/// A value that is none of a flag's choices, as fftd's other value errors say it: "--flag VALUE:
/// expected one of ...", the value as typed (clap's own message strips its control characters,
/// so `ha\e[2Jnn` read as the valid `hann`). None for a missing value.
fn choice_error(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let (flag, value) = value_error_parts(e).filter(|(_, v)| !v.is_empty())?;
    let Some(ContextValue::Strings(choices)) = e.get(ContextKind::ValidValue) else {
        return None;
    };
    let hint = match e.get(ContextKind::SuggestedValue) {
        Some(ContextValue::String(like)) => format!(" (did you mean {like}?)"),
        _ => String::new(),
    };
    let value = fftd::types::escaped(&value);
    Some(format!(
        "{flag} {value}: expected one of {}{hint}",
        choices.join(", ")
    ))
}

/// clap's message as one line, without its usage and help hints.
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    // (the usage lines and the help hint come last)
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ").replace("error: ", "")
}

/// mimalloc: batch-sized buffers and frames move between threads; glibc's malloc answered that with
/// mmap/munmap and heap trimming (14k page faults for a 128 MB run), mimalloc recycles them.
/// (Wrapped to count the live heap under FFTD_HEAP_COUNT=1: fftd::heap.)
#[global_allocator]
static GLOBAL: fftd::heap::CountingMiMalloc = fftd::heap::CountingMiMalloc;
