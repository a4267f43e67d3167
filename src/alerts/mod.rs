//! Alerts (`--alert RULE`, issue 27): a rule watches a band's power (`level`) in every stream and
//! its alert starts and ends as the rule says (`rule`, `state`). Each change is an event,
//! `{"event":"start"|"end","alert":NAME,"stream":K,"time_s":T,"db":V}`, that goes to
//! `--events PATH|-|nats://HOST:PORT/SUBJECT` as NDJSON (`events`), to the live view (a
//! server-sent-events endpoint `/events`, marks on the waterfall, a `/metrics` counter per rule:
//! `feed`), to the log, and to the triggered recorder (`crate::record`).
//!
//! Levels are measured in the encode threads (any order, `BandLevels::measure`); the sink, which
//! has the rows in order, follows them (`Alerts::observe`).

pub(crate) mod events;
pub(crate) mod feed;
pub(crate) mod level;
pub(crate) mod rule;
pub(crate) mod state;

use events::{Event, EventWriter, EventsTarget};
use feed::AlertFeed;
use rule::AlertRule;
use state::AlertState;
use std::sync::Arc;

/// The alert options of a run (plain values, built where the run is wired).
#[derive(Clone, Debug, Default)]
pub struct AlertOptions {
    pub rules: Vec<AlertRule>,
    pub events: Option<EventsTarget>,
    /// `--events nats://…`: the fleet's credentials and TLS flags (`--nats-creds`, …).
    pub nats: EventsNats,
    /// `--retry` is given: its inputs' `gap` events go to `--events` and the live view's feed.
    pub gaps: bool,
    /// `--retry`: also how long an `--events nats://` server that went away is waited for.
    pub retry: Option<crate::source::retry_policy::RetryPolicy>,
}

impl AlertOptions {
    /// Whether the run has events: alert rules, or `--retry`'s gap events (to an `--events`
    /// target, the live view's `/events`, or nowhere but the log).
    pub fn wanted(&self) -> bool {
        !self.rules.is_empty() || self.events.is_some() || self.gaps
    }

    /// Whether the events go to a NATS server (`--events nats://…`).
    pub fn events_to_nats(&self) -> bool {
        matches!(self.events, Some(EventsTarget::Nats(_)))
    }

    /// Whether the events go to stdout (`--events -`, or a name of it such as /dev/stdout).
    pub(crate) fn events_to_stdout(&self) -> bool {
        match &self.events {
            Some(EventsTarget::Stdout) => true,
            Some(EventsTarget::File(path)) => crate::stdio::names_stdout(path),
            _ => false,
        }
    }
}

/// The NATS connection flags `--events nats://…` connects with (never shown in `Debug`: they
/// hold secrets).
#[derive(Clone, Default)]
pub struct EventsNats(pub crate::fleet::connect::NatsArgs);

impl std::fmt::Debug for EventsNats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventsNats(..)")
    }
}

/// What hears about each event besides the writer and the feed (the triggered recorder), and
/// about every row's time (so it knows when a post-roll has passed).
pub trait Listener: Send {
    /// What it writes, for errors (`--record-on-alert DIR`).
    fn target(&self) -> String;
    fn event(&mut self, event: &Event) -> std::io::Result<()>;
    fn row(&mut self, _stream: usize, _time_s: f64) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the alerts could not write: `--events` or a listener's files (`Listener::target`), and
/// why. The run fails with it (events are the point).
#[derive(Debug)]
pub struct WriteFailed {
    pub target: String,
    pub error: std::io::Error,
}

type Written = std::result::Result<(), WriteFailed>;

fn events_failed(error: std::io::Error) -> WriteFailed {
    WriteFailed {
        target: "--events".into(),
        error,
    }
}

fn listener_failed(listener: &dyn Listener) -> impl FnOnce(std::io::Error) -> WriteFailed + '_ {
    move |error| WriteFailed {
        target: listener.target(),
        error,
    }
}

/// The sink's side: every rule's state in every stream, and where events go.
pub struct Alerts {
    rules: Vec<AlertRule>,
    /// Per stream, per rule.
    states: Vec<Vec<AlertState>>,
    writer: Option<EventWriter>,
    feed: Option<Arc<AlertFeed>>,
    listeners: Vec<Box<dyn Listener>>,
    /// Per stream: its last row's time and levels (the run's end ends alerts still on there).
    last: Vec<Option<(f64, Vec<f64>)>>,
}

impl Alerts {
    /// `writer`: where `--events` go (opened by the caller); `feed`: the live view's.
    pub fn new(
        rules: Vec<AlertRule>,
        streams: usize,
        writer: Option<EventWriter>,
        feed: Option<Arc<AlertFeed>>,
    ) -> Self {
        if let Some(EventWriter::Nats(nats)) = &writer {
            nats.set_streams(0..streams);
        }
        Alerts {
            states: vec![vec![AlertState::default(); rules.len()]; streams],
            rules,
            writer,
            feed,
            listeners: Vec::new(),
            last: vec![None; streams],
        }
    }

    /// Adds a listener that hears every event after the writer and the feed.
    pub fn listen(&mut self, listener: Box<dyn Listener>) {
        self.listeners.push(listener);
    }

    pub fn rules(&self) -> &[AlertRule] {
        &self.rules
    }

    /// Follows one row of `stream` at `time_s` with each rule's level (`levels`, in rule order).
    /// An event that cannot be written is an error (the run fails: events are the point).
    pub(crate) fn observe(&mut self, stream: usize, time_s: f64, levels: &[f64]) -> Written {
        self.tick()?;
        for listener in &mut self.listeners {
            let row = listener.row(stream, time_s);
            row.map_err(listener_failed(listener.as_ref()))?;
        }
        let Some(states) = self.states.get_mut(stream) else {
            return Ok(());
        };
        let mut changes = Vec::new();
        for ((rule, state), &db) in self.rules.iter().zip(states.iter_mut()).zip(levels) {
            if let Some(change) = state.step(rule, time_s, db) {
                changes.push(Event {
                    change,
                    alert: rule.name.clone(),
                    stream,
                    time_s,
                    db,
                    run_end: false,
                });
            }
        }
        if let Some(last) = self.last.get_mut(stream) {
            match last {
                Some((t, l)) => {
                    *t = time_s;
                    l.clear();
                    l.extend_from_slice(levels);
                }
                None => *last = Some((time_s, levels.to_vec())),
            }
        }
        changes.iter().try_for_each(|event| self.emit(event))
    }

    /// One event to the log, `--events`, the live view and the listeners.
    fn emit(&mut self, event: &Event) -> Written {
        tracing::info!(
            alert = %event.alert,
            stream = event.stream,
            time_s = event.time_s,
            db = event.db,
            "alert {}{}",
            event.change.name(),
            if event.run_end { " (the run ends)" } else { "" }
        );
        if let Some(writer) = self.writer.as_mut() {
            writer.write(event).map_err(events_failed)?;
        }
        if let Some(feed) = &self.feed {
            feed.publish(event);
        }
        for listener in &mut self.listeners {
            let heard = listener.event(event);
            heard.map_err(listener_failed(listener.as_ref()))?;
        }
        Ok(())
    }

    /// Writes the `gap` events of `--retry` inputs that came since the last call
    /// (`source::outages`) to `--events` and the live view; called for every batch of rows, with
    /// or without rules.
    pub fn tick(&mut self) -> Written {
        if let Some(EventWriter::Nats(nats)) = self.writer.as_mut() {
            nats.watch().map_err(events_failed)?; // a server gone: the --retry policy counts on
        }
        for json in crate::source::outages::outages().take_events() {
            if let Some(feed) = &self.feed {
                feed.publish_gap(&json);
            }
            if let Some(writer) = self.writer.as_mut() {
                writer.write_json(json).map_err(events_failed)?;
            }
        }
        Ok(())
    }

    /// The run ends: an alert still on ends at its stream's last row (`"run_end":true`), then
    /// events still buffered are written (a NATS target: sent).
    pub fn finish(&mut self) -> Written {
        // every listener and the writer are finished whatever failed before (a recording's
        // header is written there); the first error is the one returned
        let ticked = self.tick();
        let ended = ticked.and_then(|()| self.end_alerts_still_on());
        let mut first = ended.err();
        for listener in &mut self.listeners {
            let finished = listener.finish();
            if let Err(e) = finished.map_err(listener_failed(listener.as_ref())) {
                first.get_or_insert(e);
            }
        }
        if let Some(Err(e)) = self.writer.as_mut().map(|w| w.finish()) {
            first.get_or_insert(events_failed(e));
        }
        first.map_or(Ok(()), Err)
    }

    /// Ends each alert still on at its stream's last row (`"run_end":true`).
    fn end_alerts_still_on(&mut self) -> Written {
        let mut ends = Vec::new();
        for (stream, states) in self.states.iter_mut().enumerate() {
            let Some((time_s, levels)) = self.last.get(stream).and_then(Option::as_ref) else {
                continue;
            };
            for (k, (rule, state)) in self.rules.iter().zip(states.iter_mut()).enumerate() {
                if std::mem::take(&mut state.on) {
                    ends.push(Event {
                        change: state::Change::End,
                        alert: rule.name.clone(),
                        stream,
                        time_s: *time_s,
                        db: levels.get(k).copied().unwrap_or(f64::NAN),
                        run_end: true,
                    });
                }
            }
        }
        ends.iter().try_for_each(|event| self.emit(event))
    }
}

/// Checks `--alert` and `--events` into the run's options. `spectra_to_stdout`: the spectra go
/// to stdout (so events cannot); `conflict`: a flag whose rows the rules cannot read; `retry`: `--retry` is given, whose gaps are events too;
/// `measured`: `--levels` and `--peaks` are given (what `level=` and `peak=` rules read). The
/// message is a usage error's.
pub(crate) fn check_alerts(
    rules: &[AlertRule],
    events: Option<&str>,
    spectra_to_stdout: bool,
    conflict: Option<&str>,
    retry: bool,
    measured: (bool, bool),
) -> Result<AlertOptions, String> {
    let events = events.map(events::parse_events).transpose()?;
    if rules.is_empty() && !(retry && events.is_some()) {
        if events.is_some() {
            return Err(
                "--events: give the rules whose events it takes with --alert RULE (or --retry, whose gaps it takes)"
                    .into(),
            );
        }
        // --retry alone: its gaps still go to the live view's /events
        return Ok(AlertOptions {
            gaps: retry,
            ..AlertOptions::default()
        });
    }
    if let Some(flag) = conflict {
        return Err(format!(
            "--alert cannot read rows made with {flag} (give the alerts in a run without it)"
        ));
    }
    for rule in rules {
        match rule.reads {
            rule::Reads::Level(_) if !measured.0 => {
                return Err(format!(
                    "--alert {}: level= reads the row's --levels readings: give --levels",
                    rule.name
                ))
            }
            rule::Reads::Peak(..) if !measured.1 => {
                return Err(format!(
                    "--alert {}: peak= reads the row's --peaks: give --peaks N",
                    rule.name
                ))
            }
            _ => {}
        }
    }
    if let Some(twice) = rules
        .iter()
        .enumerate()
        .find(|(i, r)| rules[..*i].iter().any(|o| o.name == r.name))
    {
        return Err(format!("--alert: two rules are named '{}'", twice.1.name));
    }
    let events_to_stdout = match &events {
        Some(events::EventsTarget::Stdout) => Some("-".to_string()),
        Some(events::EventsTarget::File(path)) if crate::stdio::names_stdout(path) => {
            Some(path.display().to_string())
        }
        _ => None,
    };
    if let Some(name) = events_to_stdout.filter(|_| spectra_to_stdout) {
        return Err(format!(
            "--events {name}: the spectra go to stdout already; give --output FILE or --events PATH"
        ));
    }
    Ok(AlertOptions {
        rules: rules.to_vec(),
        events,
        nats: EventsNats::default(),
        gaps: retry,
        retry: None, // the policy itself: set by the caller
    })
}
