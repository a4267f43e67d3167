//! Alerts (`--alert RULE`, issue 27): a rule watches a band's power (`level`) in every stream and
//! its alert starts and ends as the rule says (`rule`, `state`). Each change is an event,
//! `{"event":"start"|"end","alert":NAME,"stream":K,"time_s":T,"db":V}`, that goes to
//! `--events PATH|-|nats://HOST:PORT/SUBJECT` as NDJSON (`events`), to the live view (a
//! server-sent-events endpoint `/events`, marks on the waterfall, a `/metrics` counter per rule:
//! `feed`), to the log, and to the triggered recorder (`crate::record`).
//!
//! Levels are measured in the encode threads (any order, `BandLevels::measure`); the sink, which
//! has the rows in order, follows them (`Alerts::observe`).

pub mod events;
pub mod feed;
pub mod level;
pub mod rule;
pub mod state;

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
}

/// What hears about each event besides the writer and the feed (the triggered recorder), and
/// about every row's time (so it knows when a post-roll has passed).
pub trait Listener: Send {
    fn event(&mut self, event: &Event) -> std::io::Result<()>;
    fn row(&mut self, _stream: usize, _time_s: f64) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
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
}

impl Alerts {
    /// `writer`: where `--events` go (opened by the caller); `feed`: the live view's.
    pub fn new(
        rules: Vec<AlertRule>,
        streams: usize,
        writer: Option<EventWriter>,
        feed: Option<Arc<AlertFeed>>,
    ) -> Self {
        Alerts {
            states: vec![vec![AlertState::default(); rules.len()]; streams],
            rules,
            writer,
            feed,
            listeners: Vec::new(),
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
    pub fn observe(&mut self, stream: usize, time_s: f64, levels: &[f64]) -> std::io::Result<()> {
        for listener in &mut self.listeners {
            listener.row(stream, time_s)?;
        }
        let Some(states) = self.states.get_mut(stream) else {
            return Ok(());
        };
        for ((rule, state), &db) in self.rules.iter().zip(states.iter_mut()).zip(levels) {
            let Some(change) = state.step(rule, time_s, db) else {
                continue;
            };
            let event = Event {
                change,
                alert: rule.name.clone(),
                stream,
                time_s,
                db,
            };
            tracing::info!(
                alert = %event.alert,
                stream,
                time_s,
                db,
                "alert {}",
                change.name()
            );
            if let Some(writer) = self.writer.as_mut() {
                writer.write(&event)?;
            }
            if let Some(feed) = &self.feed {
                feed.publish(&event);
            }
            for listener in &mut self.listeners {
                listener.event(&event)?;
            }
        }
        Ok(())
    }

    /// Events still buffered are written (a NATS target: sent).
    pub fn finish(&mut self) -> std::io::Result<()> {
        for listener in &mut self.listeners {
            listener.finish()?;
        }
        match self.writer.as_mut() {
            Some(w) => w.finish(),
            None => Ok(()),
        }
    }
}

/// Checks `--alert` and `--events` into the run's options. `spectra_to_stdout`: the spectra go
/// to stdout (so events cannot); `conflict`: a flag whose rows are not plain bins, which the
/// band level cannot read yet. The message is a usage error's.
pub fn check_alerts(
    rules: &[AlertRule],
    events: Option<&str>,
    spectra_to_stdout: bool,
    conflict: Option<&str>,
) -> Result<AlertOptions, String> {
    let events = events.map(events::parse_events).transpose()?;
    if rules.is_empty() {
        if events.is_some() {
            return Err("--events: give the rules whose events it takes with --alert RULE".into());
        }
        return Ok(AlertOptions::default());
    }
    if let Some(flag) = conflict {
        return Err(format!(
            "--alert reads each row's bins; {flag} changes the rows (give alerts on plain spectra)"
        ));
    }
    if let Some(twice) = rules
        .iter()
        .enumerate()
        .find(|(i, r)| rules[..*i].iter().any(|o| o.name == r.name))
    {
        return Err(format!("--alert: two rules are named '{}'", twice.1.name));
    }
    if spectra_to_stdout && events == Some(events::EventsTarget::Stdout) {
        return Err(
            "--events -: the spectra go to stdout already; give --output FILE or --events PATH"
                .into(),
        );
    }
    Ok(AlertOptions {
        rules: rules.to_vec(),
        events,
    })
}
