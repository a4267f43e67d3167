//! Alert events and `--events PATH|-|nats://HOST:PORT/SUBJECT`: one NDJSON line per event,
//! `{"event":"start"|"end","alert":NAME,"stream":K,"time_s":T,"db":V}` (`db` null when the level
//! is not a number; an `end` made by the run ending adds `"run_end":true`). A file is appended to (a daemon's restarts keep earlier events) and flushed
//! at every event, and opened again when its path names another file or none (logrotate moved
//! it); `-` is stdout; a NATS subject gets each line as a core NATS message.

use super::state::Change;
use crate::error::FftdError;
use crate::types::number::{push, Syntax};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One alert's start or end.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub change: Change,
    pub alert: String,
    pub stream: usize,
    pub time_s: f64,
    pub db: f64,
    /// An `end` made by the run ending while the alert was on (`"run_end":true`).
    pub run_end: bool,
}

impl Event {
    /// The event's JSON object, without a newline.
    pub fn json(&self) -> String {
        let mut out = Vec::with_capacity(96);
        let _ = write!(
            out,
            "{{\"event\":\"{}\",\"alert\":\"{}\",\"stream\":{},\"time_s\":",
            self.change.name(),
            self.alert, // names are [A-Za-z0-9_.-]: nothing to escape
            self.stream
        );
        push(&mut out, self.time_s, Syntax::Json);
        out.extend_from_slice(b",\"db\":");
        push(&mut out, self.db, Syntax::Json);
        if self.run_end {
            out.extend_from_slice(b",\"run_end\":true");
        }
        out.push(b'}');
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Where `--events` go.
#[derive(Clone, Debug, PartialEq)]
pub enum EventsTarget {
    Stdout,
    File(PathBuf),
    /// `nats://HOST:PORT/SUBJECT`, as given.
    Nats(String),
}

/// Parses `--events`.
pub(crate) fn parse_events(text: &str) -> Result<EventsTarget, String> {
    match text {
        "" => Err("--events: give a file, - for stdout or nats://HOST:PORT/SUBJECT".into()),
        "-" => Ok(EventsTarget::Stdout),
        t if t.starts_with("nats://") => {
            let url = crate::types::nats_url::NatsUrl::parse("--events", t)?;
            url.subject("--events")?;
            Ok(EventsTarget::Nats(t.to_string()))
        }
        t if t.contains("://") => Err(format!(
            "--events {t}: a file, - for stdout or nats://HOST:PORT/SUBJECT"
        )),
        t => Ok(EventsTarget::File(PathBuf::from(t))),
    }
}

/// An open `--events` target.
pub enum EventWriter {
    Stdout,
    /// A file and its path: opened again when the path names another file (`moved`).
    File(PathBuf, File),
    Nats(Box<super::feed::NatsEvents>),
}

impl EventWriter {
    /// Opens `target` (a file is created or appended to; a FIFO waits for its reader until a
    /// stop; a NATS server must answer now).
    pub fn open(
        target: &EventsTarget,
        nats: &super::EventsNats,
        retry: Option<crate::source::retry_policy::RetryPolicy>,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<Self, FftdError> {
        match target {
            EventsTarget::Stdout => Ok(EventWriter::Stdout),
            EventsTarget::File(path) => open_append(path, stop)
                .map(|file| EventWriter::File(path.clone(), file))
                .map_err(|e| match e.kind() {
                    io::ErrorKind::Interrupted => FftdError::Stopped(format!(
                        "--events {}: stopped while waiting for a reader; nothing was analysed",
                        crate::types::shown_path(path)
                    )),
                    _ => FftdError::Runtime(format!(
                        "--events {}: {e}",
                        crate::types::shown_path(path)
                    )),
                }),
            EventsTarget::Nats(url) => super::feed::NatsEvents::connect(url, &nats.0, retry)
                .map(|n| EventWriter::Nats(Box::new(n)))
                .map_err(FftdError::Runtime),
        }
    }

    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        self.write_json(event.json())
    }

    /// Writes one event object (an alert's, or an input's `gap`: `source::outages`).
    pub(crate) fn write_json(&mut self, mut line: String) -> io::Result<()> {
        match self {
            EventWriter::Nats(nats) => nats.publish(line),
            _ => {
                line.push('\n');
                self.write_line(line.as_bytes())
            }
        }
    }

    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            EventWriter::Stdout => {
                // (a copy of stdout per line: events are few; `opening::stdout_file`)
                crate::sink::opening::stdout_file()?.write_all(line)
            }
            EventWriter::File(path, file) => {
                let named = |e: io::Error| {
                    let shown = crate::types::shown_path(path);
                    io::Error::new(e.kind(), format!("{shown}: {e}"))
                };
                if moved(path, file) {
                    *file = append_to(path).map_err(named)?;
                }
                append_line(file, line).map_err(named)
            }
            EventWriter::Nats(_) => Ok(()),
        }
    }

    pub fn finish(&mut self) -> io::Result<()> {
        match self {
            EventWriter::Nats(nats) => nats.flush(),
            _ => Ok(()),
        }
    }
}

/// Whether `path` no longer names the open `file` (logrotate moved or removed it): the next
/// event goes to a new file there, as a row output does after SIGHUP. Events are few: a look
/// at the path per event.
fn moved(path: &Path, file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(path), file.metadata()) {
        (Ok(now), Ok(open)) => (now.dev(), now.ino()) != (open.dev(), open.ino()),
        (Err(_), _) => true,
        (_, Err(_)) => false,
    }
}

/// `--events PATH` appends to a file there only if it holds events already (its first line is
/// an event object, an earlier run's) or nothing: any other file (a config, a recording, a
/// typo's neighbour) would be spoilt by lines added to it. Checked before the run begins.
pub(crate) fn check_appendable(path: &Path) -> Result<(), String> {
    use std::io::{BufRead, Read};
    // (/dev/stderr and the like name the process's own streams, whatever file they were
    // given: a daemon's log opened with >> is theirs to append to)
    if crate::stdio::names_a_descriptor(path) {
        return Ok(());
    }
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0);
    let Some(file) = regular.then(|| File::open(path).ok()).flatten() else {
        return Ok(()); // (new, empty, a FIFO or device; one unreadable fails at its open)
    };
    let mut first = Vec::new();
    let read = io::BufReader::new(file.take(1 << 16)).read_until(b'\n', &mut first);
    let value: Option<serde_json::Value> =
        read.ok().and_then(|_| serde_json::from_slice(&first).ok());
    // (a first line cut by a full disk is an alert event begun: fftd writes "event" first)
    let is_event = value.is_some_and(|v| v.get("event").is_some_and(|e| e.is_string()))
        || first.starts_with(b"{\"event\":");
    match is_event {
        true => Ok(()),
        false => Err(format!(
            "--events {}: the file is there and is not an events file (its first line is not an event): refusing to add lines to it; give a new file or remove it",
            crate::types::shown_path(path)
        )),
    }
}

/// A regular file appended to; a FIFO (whose open would block until a reader comes, past a
/// Ctrl-C) opened as every output is (`sink::opening`).
fn open_append(path: &Path, stop: &std::sync::atomic::AtomicBool) -> io::Result<File> {
    if crate::sink::opening::is_pipe_path(path) {
        return crate::sink::opening::create(path, stop);
    }
    append_to(path)
}

/// A regular file, created or appended to. One that ends inside a line (an earlier run's last
/// event cut by a full disk, or not an events file) gets a newline first: the events after it
/// stay lines of their own.
fn append_to(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::FileExt;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)?;
    let meta = file.metadata()?;
    let mut last = [b'\n'];
    if meta.is_file() && meta.len() > 0 {
        file.read_exact_at(&mut last, meta.len() - 1)?;
    }
    if last[0] != b'\n' {
        file.write_all(b"\n")?;
    }
    Ok(file)
}

/// Appends `line` whole or not at all: a write that fails part-way (a full disk) is cut back
/// off the file, so the file never ends in half an event.
fn append_line(file: &mut File, line: &[u8]) -> io::Result<()> {
    let regular = file.metadata().ok().filter(|m| m.is_file());
    let before = regular.map(|m| m.len());
    file.write_all(line).inspect_err(|_| {
        if let Some(len) = before {
            let _ = file.set_len(len);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_the_issues_object() {
        let e = Event {
            change: Change::Start,
            alert: "hum".into(),
            stream: 0,
            time_s: 1.5,
            db: -3.0103,
            run_end: false,
        };
        assert_eq!(
            e.json(),
            r#"{"event":"start","alert":"hum","stream":0,"time_s":1.5,"db":-3.0103}"#
        );
        let e = Event {
            db: f64::NEG_INFINITY,
            change: Change::End,
            ..e
        };
        assert!(e.json().contains(r#""event":"end""#) && e.json().ends_with(r#""db":null}"#));
        let e = Event { run_end: true, ..e };
        assert!(e.json().ends_with(r#""db":null,"run_end":true}"#));
        assert_eq!(parse_events("-"), Ok(EventsTarget::Stdout));
        assert!(parse_events("http://x").is_err());
        assert!(parse_events("nats://127.0.0.1:4222/alerts").is_ok());
    }
}
