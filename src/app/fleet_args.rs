//! The fleet's command line: the `--nats-*` connection flags (shared by a run, `fftd publish` and
//! `fftd fleet setup`) and `fftd fleet`'s subcommands, handed to `fleet` as its plain
//! `connect::NatsArgs` and `SetupArgs`. `$NATS_TOKEN`, `$NATS_USER` and `$NATS_PASSWORD` are read
//! where the client connects (`fleet::connect`), so every `NatsArgs` falls back to them.

use crate::error::{FftdError, Result};
use crate::fleet::connect::NatsArgs;
use crate::fleet::SetupArgs;
use std::path::PathBuf;

/// Connection flags shared by workers, `fftd publish` and `fftd fleet setup`.
#[derive(clap::Args, Clone, Default)]
pub struct NatsFlags {
    /// NATS credentials file (.creds: JWT and nkey seed).
    #[arg(long, value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,

    /// NATS token [default: $NATS_TOKEN, or TOKEN@ in the address].
    #[arg(long, value_name = "TOKEN")]
    pub nats_token: Option<String>,

    /// NATS user name [default: $NATS_USER, or USER:PASS@ in the address].
    #[arg(long, value_name = "USER")]
    pub nats_user: Option<String>,

    /// NATS password for --nats-user [default: $NATS_PASSWORD].
    #[arg(long, value_name = "PASSWORD")]
    pub nats_password: Option<String>,

    /// Require TLS (as a tls:// address does).
    #[arg(long)]
    pub nats_tls: bool,

    /// A root certificate (PEM) to trust for the server's TLS certificate.
    #[arg(long, value_name = "PEM")]
    pub nats_ca: Option<PathBuf>,

    /// Client certificate (PEM) for TLS client authentication; needs --nats-key.
    #[arg(long, value_name = "PEM", requires = "nats_key")]
    pub nats_cert: Option<PathBuf>,

    /// Private key (PEM) of --nats-cert.
    #[arg(long, value_name = "PEM", requires = "nats_cert")]
    pub nats_key: Option<PathBuf>,

    /// Seconds the first connection may take, at most 3600 (or with a unit: 500ms, 1min)
    /// [default: 5].
    #[arg(long, value_name = "SECONDS", value_parser = crate::app::units::seconds_up_to(3600.0))]
    pub connect_timeout: Option<f64>,
}

/// The longest `--ack-wait` and `--duplicate-window`: a year.
const YEAR_S: f64 = 86_400.0 * 365.0;
impl NatsFlags {
    /// The flags as the fleet takes them.
    pub fn spec(&self) -> NatsArgs {
        NatsArgs::from(self)
    }

    /// Refuses these flags for a run that talks to no NATS server (`used`: a fleet worker, rows
    /// or events to `nats://`), where they would be taken and do nothing.
    pub fn check_used(&self, used: bool) -> Result<(), FftdError> {
        let given = [
            ("--nats-creds", self.nats_creds.is_some()),
            ("--nats-token", self.nats_token.is_some()),
            ("--nats-user", self.nats_user.is_some()),
            ("--nats-password", self.nats_password.is_some()),
            ("--nats-tls", self.nats_tls),
            ("--nats-ca", self.nats_ca.is_some()),
            ("--nats-cert", self.nats_cert.is_some()),
            ("--nats-key", self.nats_key.is_some()),
            ("--connect-timeout", self.connect_timeout.is_some()),
        ];
        match given.iter().find(|(_, given)| *given).filter(|_| !used) {
            Some((flag, _)) => Err(FftdError::Usage(format!(
                "{flag}: this run talks to no NATS server (give --file, --output or --events a nats:// address)"
            ))),
            None => Ok(()),
        }
    }
}

impl From<&NatsFlags> for NatsArgs {
    fn from(flags: &NatsFlags) -> Self {
        NatsArgs {
            nats_creds: flags.nats_creds.clone(),
            nats_token: flags.nats_token.clone(),
            nats_user: flags.nats_user.clone(),
            nats_password: flags.nats_password.clone(),
            nats_tls: flags.nats_tls,
            nats_ca: flags.nats_ca.clone(),
            nats_cert: flags.nats_cert.clone(),
            nats_key: flags.nats_key.clone(),
            connect_timeout: flags.connect_timeout,
        }
    }
}

/// Secrets shown as `***`, as `NatsArgs` shows them.
impl std::fmt::Debug for NatsFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.spec(), f)
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum FleetCommand {
    /// Create the work stream, its durable pull consumer and the spectra stream (each left as
    /// it is when it exists).
    Setup(Box<SetupFlags>),
}

#[derive(clap::Args, Debug)]
pub struct SetupFlags {
    /// The server: nats://HOST:PORT or tls://HOST:PORT (several nodes: nats://A:4222,B:4222).
    #[arg(long, value_name = "URL")]
    pub server: String,

    /// Name of the work stream (work-queue retention) the blocks go to.
    #[arg(long, value_name = "NAME", default_value = "FRAMES")]
    pub work_stream: String,

    /// Subjects the work stream captures (repeatable).
    #[arg(
        long = "work-subject",
        value_name = "SUBJECT",
        default_value = "frames.>"
    )]
    pub work_subjects: Vec<String>,

    /// Name of the durable pull consumer the workers share.
    #[arg(long, value_name = "NAME", default_value = "workers")]
    pub consumer: String,

    /// Seconds a worker has to ack a block before it is given to another (or with a unit: 2min;
    /// at most a year).
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = crate::app::units::seconds_up_to(YEAR_S))]
    pub ack_wait: f64,

    /// Deliveries of one block at most (a block that fails this many workers is given up and
    /// reported; keep max deliver × (ack wait + 150 s) within the duplicate window).
    #[arg(long, value_name = "N", default_value_t = 5,
        value_parser = crate::types::whole_in::<i64>(1, 1_000_000))]
    pub max_deliver: i64,

    /// Name of the stream that stores the spectra rows.
    #[arg(long, value_name = "NAME", default_value = "SPECTRA")]
    pub spectra_stream: String,

    /// Subjects the spectra stream captures (repeatable).
    #[arg(
        long = "spectra-subject",
        value_name = "SUBJECT",
        default_value = "spectra.>"
    )]
    pub spectra_subjects: Vec<String>,

    /// Seconds (or with a unit: 1h; at most a year) within which a message id seen again is
    /// dropped as a duplicate; keep it above
    /// max deliver × (ack wait + 150 s of a worker's retries) so a redelivered block's rows are
    /// still recognised.
    #[arg(long, value_name = "SECONDS", default_value = "900", value_parser = crate::app::units::seconds_up_to(YEAR_S))]
    pub duplicate_window: f64,

    /// Keep the streams in memory instead of files (lost when the server restarts).
    #[arg(long)]
    pub memory: bool,

    /// Delete the consumer and create it again: it then delivers every block still on the work
    /// stream, those a worker reported as left behind included (already stored rows are
    /// deduplicated). Best run while no worker runs.
    #[arg(long)]
    pub recreate_consumer: bool,

    /// Replicas of each stream (a cluster of 3 or 5 servers: 3).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = crate::types::whole_in::<usize>(1, 5))]
    pub replicas: usize,

    /// Streams the work is spread over: the work stream and N-1 shards of it (NAME-shard1, …,
    /// capturing fftd.shard1.SUBJECT, …), each with its own store and consumer, so the samples
    /// go in at several streams' byte rate; publishers and workers find them by themselves.
    #[arg(long, value_name = "N", default_value_t = crate::fleet::shards::DEFAULT_SHARDS,
        value_parser = crate::types::whole_in::<usize>(1, crate::fleet::shards::MAX_SHARDS as u64))]
    pub shards: usize,

    #[command(flatten)]
    pub nats: NatsFlags,
}

impl From<SetupFlags> for SetupArgs {
    fn from(flags: SetupFlags) -> Self {
        SetupArgs {
            nats: flags.nats.spec(),
            server: flags.server,
            work_stream: flags.work_stream,
            work_subjects: flags.work_subjects,
            consumer: flags.consumer,
            ack_wait: flags.ack_wait,
            max_deliver: flags.max_deliver,
            spectra_stream: flags.spectra_stream,
            spectra_subjects: flags.spectra_subjects,
            duplicate_window: flags.duplicate_window,
            memory: flags.memory,
            recreate_consumer: flags.recreate_consumer,
            replicas: flags.replicas,
            shards: flags.shards,
        }
    }
}

/// `fftd fleet ...`.
pub fn run_fleet(command: FleetCommand) -> Result<()> {
    match command {
        FleetCommand::Setup(flags) => {
            check_setup_names(&flags).map_err(crate::error::FftdError::Usage)?;
            crate::fleet::run_setup(&SetupArgs::from(*flags))
        }
    }
}

/// The names `fftd fleet setup` gives the server, checked before it connects: JetStream's rules
/// for stream and consumer names (no space, `.`, `*`, `>` or slash), subjects that are not
/// empty, and two streams, not one (the rows would have no stream of their own).
fn check_setup_names(flags: &SetupFlags) -> std::result::Result<(), String> {
    let names = [
        ("--work-stream", &flags.work_stream),
        ("--spectra-stream", &flags.spectra_stream),
        ("--consumer", &flags.consumer),
    ];
    let bad = |c: char| c.is_whitespace() || c.is_control() || ".*>/\\".contains(c);
    for (flag, name) in names {
        if name.is_empty() || name.chars().any(bad) {
            return Err(format!(
                "{flag} '{}': a name without spaces, '.', '*', '>' or slashes (such as FRAMES)",
                crate::types::escaped(name)
            ));
        }
    }
    if flags.work_stream == flags.spectra_stream {
        return Err(format!(
            "--work-stream and --spectra-stream are both '{}': the blocks and the rows need a stream each",
            flags.work_stream
        ));
    }
    let subjects = (flags.work_subjects.iter().map(|s| ("--work-subject", s))).chain(
        flags
            .spectra_subjects
            .iter()
            .map(|s| ("--spectra-subject", s)),
    );
    for (flag, subject) in subjects {
        check_subject(flag, subject)?;
    }
    let mut pairs = (flags.work_subjects.iter())
        .flat_map(|w| flags.spectra_subjects.iter().map(move |r| (w, r)));
    if let Some((work, rows)) = pairs.find(|(w, r)| subjects_overlap(w, r)) {
        return Err(format!(
            "--work-subject '{work}' and --spectra-subject '{rows}' overlap: a message could belong to both streams, which the server refuses"
        ));
    }
    check_server(&flags.server)
}

/// A subject a stream takes: dot-separated tokens, none empty or with spaces, `*` a whole token
/// and `>` only the whole last one (NATS's rules).
fn check_subject(flag: &str, subject: &str) -> std::result::Result<(), String> {
    let tokens: Vec<&str> = subject.split('.').collect();
    let last = tokens.len() - 1;
    let bad_token = |(i, t): (usize, &&str)| {
        t.is_empty()
            || t.chars().any(char::is_whitespace)
            || (t.contains('*') && *t != "*")
            || (t.contains('>') && (*t != ">" || i != last))
    };
    match tokens.iter().enumerate().any(bad_token) {
        true => Err(format!(
            "{flag} '{}': a subject of dot-separated tokens without spaces, '*' a whole token and '>' only the last (such as frames.>)",
            crate::types::escaped(subject)
        )),
        false => Ok(()),
    }
}

/// Whether some subject matches both patterns (`*`: any one token, `>`: one or more).
fn subjects_overlap(a: &str, b: &str) -> bool {
    let (mut a, mut b) = (a.split('.'), b.split('.'));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(">"), Some(_)) | (Some(_), Some(">")) => return true,
            (Some(x), Some(y)) if x == "*" || y == "*" || x == y => continue,
            _ => return false,
        }
    }
}

/// `--server`: a NATS server's address, which has no path (a subject goes in the subject flags).
fn check_server(server: &str) -> std::result::Result<(), String> {
    let after_scheme = server.split_once("://").map_or(server, |(_, rest)| rest);
    match after_scheme.split_once('/') {
        Some((_, path)) if !path.is_empty() => Err(format!(
            "--server {}: a server's address has no path ('{}'): give subjects with --work-subject and --spectra-subject",
            crate::types::escaped(server),
            crate::types::escaped(path)
        )),
        _ => Ok(()),
    }
}
