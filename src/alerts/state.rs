//! Each rule's alert in each stream, followed row by row in the stream's order: off until the
//! level starts it (`AlertRule::starts`) for `hold` seconds, on until it ends it for as long.
//! The event is the row at which the condition has held `hold` (the first such row: with hold 0
//! the crossing row itself), so its time is within one hop of when the level crossed plus hold.

use super::rule::AlertRule;

/// Whether an alert began or ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Start,
    End,
}

impl Change {
    pub fn name(self) -> &'static str {
        match self {
            Change::Start => "start",
            Change::End => "end",
        }
    }
}

/// One rule in one stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct AlertState {
    pub on: bool,
    /// When the condition that would change `on` began holding.
    since: Option<f64>,
}

/// Rows closer than this to `hold` count as having held it (row times are sums of hops).
const HOLD_SLACK_S: f64 = 1e-9;

impl AlertState {
    /// Follows one row at `time_s` with level `db`; the change it makes, if any.
    pub(crate) fn step(&mut self, rule: &AlertRule, time_s: f64, db: f64) -> Option<Change> {
        let condition = match self.on {
            false => rule.starts(db),
            true => rule.ends(db),
        };
        if !condition {
            self.since = None;
            return None;
        }
        let since = *self.since.get_or_insert(time_s);
        if time_s - since + HOLD_SLACK_S < rule.hold {
            return None;
        }
        self.since = None;
        self.on = !self.on;
        Some(if self.on { Change::Start } else { Change::End })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hysteresis_and_hold_shape_the_events() {
        let rule: AlertRule = "name=t,band=0-1,above=-20,hysteresis=5,hold=200ms"
            .parse()
            .unwrap();
        let mut s = AlertState::default();
        let levels = [
            -30.0, -10.0, -10.0, -30.0, // a blip shorter than hold: nothing
            -10.0, -10.0, -10.0, // held 0.2 s: start at the third row
            -22.0, -22.0, -22.0, -22.0, // inside the hysteresis: still on
            -26.0, -26.0, -26.0, // at or below -25 for 0.2 s: end at the third row
        ];
        let events: Vec<(usize, Change)> = levels
            .iter()
            .enumerate()
            .filter_map(|(i, &db)| s.step(&rule, i as f64 * 0.1, db).map(|c| (i, c)))
            .collect();
        assert_eq!(events, vec![(6, Change::Start), (13, Change::End)]);
    }
}
