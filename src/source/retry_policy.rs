//! `--retry POLICY` (issue 27): how long a live input that fails is reopened before the run gives
//! up on it. `forever`, `N` (attempts in a row), or a duration such as `90s`, `10min`, `1h` (the
//! longest one outage may last). Attempts wait with exponential backoff: 0.5 s, 1 s, 2 s, … up to
//! 30 s between two attempts. An outage ends when samples flow again; the next one counts anew.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The first wait after a failure.
pub(crate) const FIRST_WAIT: Duration = Duration::from_millis(500);
/// The longest wait between two attempts.
pub(crate) const LONGEST_WAIT: Duration = Duration::from_secs(30);

/// How long one outage may be retried.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RetryPolicy {
    /// Until the input comes back or the run is stopped.
    Forever,
    /// At most this many reopen attempts in a row.
    Attempts(u32),
    /// At most this long, from the failure to samples flowing again.
    For(Duration),
}

/// A `--retry` value that is not a policy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("'{0}': expected forever, a number of attempts from 1 (10) or a duration above 0 (90s, 10min, 1h, 1d); without --retry a lost input ends the run")]
pub struct RetryPolicyError(pub String);

impl FromStr for RetryPolicy {
    type Err = RetryPolicyError;
    fn from_str(text: &str) -> Result<Self, RetryPolicyError> {
        let bad = || RetryPolicyError(text.to_string());
        let t = text.trim();
        if t.eq_ignore_ascii_case("forever") {
            return Ok(RetryPolicy::Forever);
        }
        if let Ok(n) = t.parse::<u32>() {
            return (n > 0).then_some(RetryPolicy::Attempts(n)).ok_or_else(bad);
        }
        let seconds = crate::types::duration::seconds(t, false).ok_or_else(bad)?;
        if !(seconds > 0.0 && seconds < 1e12) {
            return Err(bad());
        }
        Ok(RetryPolicy::For(Duration::from_secs_f64(seconds)))
    }
}

impl fmt::Display for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryPolicy::Forever => write!(f, "forever"),
            RetryPolicy::Attempts(n) => write!(f, "{n}"),
            RetryPolicy::For(d) => write!(f, "{}s", d.as_secs_f64()),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempt` (1 for the first): 0.5 s doubling, at most 30 s.
    pub fn wait(attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(16);
        (FIRST_WAIT * (1u32 << doublings)).min(LONGEST_WAIT)
    }

    /// Whether another attempt may be made after `attempts` failed ones, `elapsed` into the
    /// outage, when the next would begin after `wait`.
    pub fn allows(&self, attempts: u32, elapsed: Duration, wait: Duration) -> bool {
        match *self {
            RetryPolicy::Forever => true,
            RetryPolicy::Attempts(n) => attempts < n,
            RetryPolicy::For(limit) => elapsed + wait <= limit,
        }
    }

    /// When an outage that began `elapsed` ago must have ended (None: no time limit).
    pub(crate) fn time_left(&self, elapsed: Duration) -> Option<Duration> {
        match *self {
            RetryPolicy::For(limit) => Some(limit.saturating_sub(elapsed)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_refuse() {
        assert_eq!("forever".parse(), Ok(RetryPolicy::Forever));
        assert_eq!("10".parse(), Ok(RetryPolicy::Attempts(10)));
        assert_eq!(
            "1h".parse(),
            Ok(RetryPolicy::For(Duration::from_secs(3600)))
        );
        assert_eq!("90s".parse(), Ok(RetryPolicy::For(Duration::from_secs(90))));
        for bad in ["", "0", "-3", "1x", "soon", "0s", "infs"] {
            assert!(bad.parse::<RetryPolicy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let waits: Vec<f64> = (1..=9)
            .map(|a| RetryPolicy::wait(a).as_secs_f64())
            .collect();
        assert_eq!(waits, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]);
        assert_eq!(RetryPolicy::wait(u32::MAX), LONGEST_WAIT);
        let p = RetryPolicy::Attempts(3);
        assert!(
            p.allows(2, Duration::ZERO, Duration::ZERO)
                && !p.allows(3, Duration::ZERO, Duration::ZERO)
        );
        let t = RetryPolicy::For(Duration::from_secs(10));
        assert!(t.allows(9, Duration::from_secs(8), Duration::from_secs(2)));
        assert!(!t.allows(1, Duration::from_secs(9), Duration::from_secs(2)));
    }
}
