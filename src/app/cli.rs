//! The command line: `fftd [OPTIONS]` runs the analysis; `devices`, `check`, `bench`, `publish`
//! and `fleet` are subcommands. A run's options are defined once in `config::Options` (also the
//! config-file keys); `check` takes the subset it uses (`CHECK_FLAGS`). `parse` builds the
//! command: every flag whose value is a number takes a leading '-', so that its own parser names
//! the flag and its range ("--average -1: ...") instead of clap's "unexpected argument '-1'".

use crate::app::options::Options;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "fftd",
    version,
    about = "Streaming spectrum analyser: files, stdin or a microphone in; magnitude spectra out",
    long_about = None,
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  fftd --file examples/input.txt --frame whole --rate 8000\n  fftd --file examples/tones.wav --frame 1024 --hop 256 --scale db --format csv\n  fftd --file rec.wav --frame 4096 --hop 1024 --format f32 > spectra.f32\n  fftd --mic --scale db --format ndjson"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Read options from a TOML file (see config/fftd.toml); command-line flags win.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub options: Options,

    /// NATS credentials and TLS for fleet workers (`--file nats://...`), for a run publishing
    /// its rows (`--output nats://...`) and for its events (`--events nats://...`).
    #[command(flatten)]
    pub nats: crate::app::fleet_args::NatsFlags,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List OpenCL platforms/devices and audio inputs.
    Devices,
    /// Run the same frames on the CPU and on OpenCL and compare (exit 1 on any mismatch).
    Check(Box<CheckArgs>),
    /// Time the CPU and OpenCL engines per frame size; find the break-even; calibrate `auto`.
    Bench(Box<crate::app::bench_args::BenchArgs>),
    /// Send recordings or live capture to a fleet's work stream as frame-aligned sample blocks
    /// (NATS JetStream; docs/fleet.md).
    Publish(Box<crate::app::publish::PublishArgs>),
    /// Fleet administration: `fftd fleet setup` creates the streams and the workers' consumer.
    #[command(subcommand)]
    Fleet(crate::app::fleet_args::FleetCommand),
    /// Builds a job's programs on one device: handed on by a run that ended while its device
    /// start-up was building them (`fft::opencl::job_programs`); not listed in the help.
    #[command(name = "build-programs", hide = true)]
    BuildPrograms(crate::app::build_programs::BuildProgramsArgs),
}

/// Value names of the flags that take a number (or a value that starts with one: `WxH`,
/// `MIN:MAX`, `N|DURATION`): these accept a leading '-' (`parse`).
pub const NUMERIC_VALUE_NAMES: &[&str] = &[
    "N",
    "H",
    "B",
    "C",
    "HZ",
    "MS",
    "SECONDS",
    "REL",
    "WxH",
    "MIN:MAX",
    "N|DURATION",
    "N|whole",
    "mix|N|all",
    "A..B|LIST",
    "DB|auto",
    "FRACTION",
    "DURATION",
    "DURATION|SIZE",
    "forever|N|DURATION",
    "N|max",
    "A,B",
    "LOW:HIGH:BIN",
    "ADDR",
];

/// The command line as typed: `Cli` with every number-taking flag accepting a leading '-'.
pub fn parse() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os())
}

/// `parse` on `args` (the first is the program name).
pub(crate) fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut matches = command().try_get_matches_from(args)?;
    Cli::from_arg_matches_mut(&mut matches)
}

/// `Cli`'s clap command, number-taking flags accepting a leading '-' in every subcommand.
pub fn command() -> clap::Command {
    numbers_take_hyphens(Cli::command())
}

/// An argument the command line's (sub)command does not take, where it is a long flag of fftd's
/// other commands: "--format is a flag of a run, not of fftd check", and what lists
/// the command's own. None where no command has it (a typo: clap's suggestion says more).
/// `args` is the whole command line, the program name first.
pub fn flag_of_another_command(args: &[String], unknown: &str) -> Option<String> {
    let long = unknown.strip_prefix("--")?.split('=').next()?;
    let root = command();
    let mut used = vec![root.get_name().to_string()];
    let mut here = &root;
    for arg in args.iter().skip(1).filter(|a| !a.starts_with('-')) {
        let Some(sub) = here.find_subcommand(arg) else {
            break;
        };
        used.push(sub.get_name().to_string());
        here = sub;
    }
    let has = |cmd: &clap::Command| cmd.get_arguments().any(|a| a.get_long() == Some(long));
    if has(here) {
        return None;
    }
    let mut holders = Vec::new();
    commands_with(
        &root,
        &mut vec![root.get_name().to_string()],
        &has,
        &mut holders,
    );
    if holders.is_empty() {
        return None;
    }
    let named = |path: &[String]| match path.len() {
        1 => "a run".to_string(),
        _ => path.join(" "),
    };
    let mut holders: Vec<String> = holders.iter().map(|p| named(p)).collect();
    let last = holders.pop()?;
    let holders = match holders.is_empty() {
        true => last,
        false => format!("{} and {last}", holders.join(", ")),
    };
    Some(format!(
        "--{long} is a flag of {holders}, not of {}; {} --help lists its flags",
        named(&used),
        used.join(" ")
    ))
}

/// The paths of `cmd` and its shown subcommands that `has` holds for.
fn commands_with(
    cmd: &clap::Command,
    path: &mut Vec<String>,
    has: &dyn Fn(&clap::Command) -> bool,
    out: &mut Vec<Vec<String>>,
) {
    if has(cmd) {
        out.push(path.clone());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        path.push(sub.get_name().to_string());
        commands_with(sub, path, has, out);
        path.pop();
    }
}

fn numbers_take_hyphens(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|arg| {
        let numeric = arg.get_value_names().is_some_and(|names| {
            names
                .iter()
                .any(|n| NUMERIC_VALUE_NAMES.contains(&n.as_str()))
        });
        match numeric {
            true => arg.allow_hyphen_values(true),
            false => arg,
        }
    })
    .mut_subcommands(numbers_take_hyphens)
}

/// `fftd check`: its own flags, and the run's flags that decide the frames and spectra it
/// compares (`CHECK_FLAGS`); a run's output flags are not among them.
#[derive(Debug)]
pub struct CheckArgs {
    pub own: CheckOwnArgs,
    /// The run's options check uses (the others left unset).
    pub options: Options,
}

#[derive(clap::Args, Debug)]
pub struct CheckOwnArgs {
    /// Largest allowed difference, relative to each frame's largest bin [default: 1e-4 with f32,
    /// 1e-10 with --precision f64].
    #[arg(long, value_name = "REL", value_parser = positive_number)]
    pub tolerance: Option<f64>,

    /// Read options from a TOML file, the same as a run's (config/fftd.toml); check uses its
    /// input and transform keys and ignores the output ones (format, output, meta, serve, ...).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// Declares the run flags `check` takes (`CHECK_FLAGS`, each an `Options` field of the same
/// name) and `check_options`, which reads them into `Options`.
macro_rules! check_flags {
    ($($field:ident),*) => {
        /// The run flags (`Options` fields) that `fftd check` takes.
        pub(crate) const CHECK_FLAGS: &[&str] = &["file", $(stringify!($field)),*];

        /// Only the fields of `o` that `check` uses (a config file's others are ignored).
        pub fn check_keys(o: Options) -> Options {
            Options { file: o.file, $($field: o.$field,)* ..Options::default() }
        }

        fn check_options(m: &ArgMatches) -> Options {
            Options {
                file: m
                    .get_many::<String>("file")
                    .map(|v| v.cloned().collect())
                    .unwrap_or_default(),
                $($field: m.get_one(stringify!($field)).cloned(),)*
                ..Options::default()
            }
        }
    };
}
check_flags!(
    input_format,
    rate,
    channels,
    channel,
    frame,
    hop,
    tail,
    window,
    scale,
    precision,
    device,
    batch,
    max_frames,
    duration
);

impl clap::Args for CheckArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let run = Options::augment_args(clap::Command::new("run"));
        let used = run
            .get_arguments()
            .filter(|a| CHECK_FLAGS.contains(&a.get_id().as_str()))
            .cloned();
        CheckOwnArgs::augment_args(cmd).args(used)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for CheckArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(CheckArgs {
            own: CheckOwnArgs::from_arg_matches(m)?,
            options: check_options(m),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// A number above 0 (`--tolerance`).
fn positive_number(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err("must be a number above 0".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value-taking flag of every subcommand, with the subcommand path leading to it.
    fn value_flags(cmd: &clap::Command, path: &[String], out: &mut Vec<(Vec<String>, clap::Arg)>) {
        for arg in cmd.get_arguments() {
            if arg.get_long().is_some() && arg.get_action().takes_values() {
                out.push((path.to_vec(), arg.clone()));
            }
        }
        for sub in cmd.get_subcommands() {
            let mut p = path.to_vec();
            p.push(sub.get_name().to_string());
            value_flags(sub, &p, out);
        }
    }

    #[test]
    fn every_number_flag_takes_a_leading_hyphen_to_its_own_parser() {
        let mut flags = Vec::new();
        value_flags(&command(), &[], &mut flags);
        let numeric: Vec<_> = flags
            .iter()
            .filter(|(_, a)| a.is_allow_hyphen_values_set())
            .collect();
        assert!(numeric.len() > 30, "{}", numeric.len());
        for (path, arg) in numeric {
            let long = format!("--{}", arg.get_long().expect("long"));
            let mut args = vec!["fftd".to_string()];
            args.extend(path.iter().cloned());
            args.extend([long.clone(), "-1".into()]);
            if let Err(e) = parse_from(&args) {
                assert_ne!(
                    e.kind(),
                    clap::error::ErrorKind::UnknownArgument,
                    "{args:?}: {e}"
                );
            }
        }
    }

    #[test]
    fn a_flag_of_another_command_is_named_so() {
        let line = |args: &[&str], unknown| {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            flag_of_another_command(&args, unknown)
        };
        let said = line(
            &["fftd", "check", "--file", "x", "--format", "csv"],
            "--format",
        );
        assert_eq!(
            said.as_deref(),
            Some(
                "--format is a flag of a run, not of fftd check; fftd check --help lists its flags"
            )
        );
        let said = line(&["fftd", "--file", "x", "--reps", "3"], "--reps=3");
        assert_eq!(
            said.as_deref(),
            Some("--reps is a flag of fftd bench, not of a run; fftd --help lists its flags")
        );
        let said = line(&["fftd", "fleet", "setup", "--frame", "3"], "--frame").expect("named");
        assert!(
            said.starts_with("--frame is a flag of a run, fftd check and "),
            "{said}"
        );
        assert!(
            said.ends_with(", not of fftd fleet setup; fftd fleet setup --help lists its flags"),
            "{said}"
        );
        // a typo, or a flag the command has: clap's own words
        assert_eq!(line(&["fftd", "check", "--formt"], "--formt"), None);
        assert_eq!(line(&["fftd", "--frame", "64"], "--frame"), None);
    }

    #[test]
    fn check_takes_only_the_flags_it_uses() {
        let cli = parse_from([
            "fftd", "check", "--file", "x", "--frame", "64", "--hop", "-3",
        ])
        .expect("parses");
        let Some(Command::Check(args)) = cli.command else {
            panic!("check")
        };
        assert_eq!(args.options.file, ["x"]);
        assert_eq!(args.options.hop, Some(-3));
        for flag in ["--output", "--serve", "--meta", "--realtime", "--format"] {
            let e = parse_from(["fftd", "check", flag, "x"]).expect_err(flag);
            assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{flag}");
        }
        // every check flag reads into the field of the same name
        let all = parse_from([
            "fftd",
            "check",
            "--file",
            "a",
            "--input-format",
            "f32",
            "--rate",
            "2",
            "--channels",
            "2",
            "--channel",
            "1",
            "--frame",
            "8",
            "--hop",
            "4",
            "--tail",
            "drop",
            "--window",
            "rect",
            "--scale",
            "db",
            "--precision",
            "f64",
            "--device",
            "cpu",
            "--batch",
            "3",
            "--max-frames",
            "5",
            "--duration",
            "1",
        ])
        .expect("parses");
        let Some(Command::Check(args)) = all.command else {
            panic!("check")
        };
        let shown = format!("{:?}", args.options);
        assert_eq!(
            shown.matches("Some(").count() + 1,
            CHECK_FLAGS.len(),
            "a check flag was not read: {shown}"
        );
    }

    #[test]
    fn a_jobs_programs_reach_their_builder_whole_on_its_hidden_command_line() {
        use crate::fft::opencl::job_programs::JobPrograms;
        use crate::fft::Scale;
        use crate::types::Precision;
        use crate::window::WindowKind;
        use clap::ValueEnum;
        let one = JobPrograms {
            device: "opencl:1:0".into(),
            frame: 65536,
            complex: true,
            window: WindowKind::BlackmanHarris,
            scale: Scale::Complex,
            precision: Precision::F64,
            bands: true,
            runs: false,
            samples_f32: true,
            rows_f32: false,
        };
        // every window, scale and precision, and each switch both ways
        let windows = WindowKind::value_variants().iter();
        let scales = Scale::value_variants().iter().cycle();
        let precisions = Precision::value_variants().iter().cycle();
        let jobs = windows
            .zip(scales)
            .zip(precisions)
            .enumerate()
            .map(|(i, ((w, s), p))| {
                let on = i % 2 == 0;
                JobPrograms {
                    device: format!("opencl:0:{i}"),
                    frame: 4096 + i,
                    complex: !on,
                    window: *w,
                    scale: *s,
                    precision: *p,
                    bands: on,
                    runs: !on,
                    samples_f32: on,
                    rows_f32: !on,
                }
            });
        let more_scales = Scale::value_variants().iter().map(|s| JobPrograms {
            scale: *s,
            ..one.clone()
        });
        for job in std::iter::once(one.clone()).chain(jobs).chain(more_scales) {
            let mut line = vec!["fftd".to_string()];
            line.extend(job.command_line());
            let parsed = parse_from(&line).expect("parses");
            let Some(Command::BuildPrograms(back)) = parsed.command else {
                panic!("build-programs: {line:?}")
            };
            assert_eq!(back.job(), job);
        }
        let help = command().render_help().to_string();
        assert!(!help.contains(JobPrograms::COMMAND), "{help}");
    }
}
