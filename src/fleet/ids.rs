//! The names fleet messages are known by: source ids and run ids (checked before they go into
//! headers), and the `Nats-Msg-Id`s the server deduplicates by.
//!
//! A dedup id must be equal exactly when two messages are the same message sent twice: a
//! publisher's retry, a redelivered block's rows. So it holds everything that makes a message
//! what it is:
//! - a block: the work subject, the source id, the publish run, the stream, its first frame and
//!   how many frames it holds;
//! - a batch of rows (`batch`): as a row, with its first frame and how many rows it holds;
//! - a row: the spectra subject, the source id, the publish run, the stream, the frame, and the
//!   analysis (frame size, hop, window, scale, format, ... as a fingerprint), so the same blocks
//!   analysed again with other flags are new rows, not duplicates.
//!
//! A run id is new for every `fftd publish` (random) unless `--run-id` repeats one to resume an
//! interrupted publish, whose blocks already stored are then dropped as duplicates. Free-text
//! parts (subject, source) are escaped (`%`, `/`, `:`), so no two different messages share an id.

use crate::types;
use std::hash::{BuildHasher, Hasher};

/// Longest source or run id accepted.
const MAX_ID_BYTES: usize = 256;

/// A source or run id fit for a header: not empty, not too long, no control characters
/// (a header cannot hold a line break). `what` names the flag or input in the error.
pub(crate) fn check_id(what: &str, id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err(format!("{what}: empty"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(format!("{what}: longer than {MAX_ID_BYTES} bytes"));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(format!(
            "{what} '{}': holds the control character {}, which a NATS header cannot carry",
            types::escaped(id),
            types::escaped(c.encode_utf8(&mut [0; 4]))
        ));
    }
    Ok(())
}

/// A run id given with `--run-id`: as `check_id`, and no `/` (ids are split at `/`).
pub(crate) fn check_run_id(id: &str) -> Result<(), String> {
    check_id("--run-id", id)?;
    match id.contains(['/', ' ']) {
        true => Err(format!("--run-id '{id}': no '/' or spaces")),
        false => Ok(()),
    }
}

/// A new run id: 16 hex digits from the process's random hash keys, the time and the pid.
pub(crate) fn new_run_id() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

/// `text` with `%`, `/` and `:` percent-escaped.
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    out
}

/// Where a message belongs: subject, source, run and stream.
pub(crate) struct Origin<'a> {
    pub subject: &'a str,
    pub source: &'a str,
    pub run: &'a str,
    pub stream: usize,
}

impl Origin<'_> {
    fn prefix(&self) -> String {
        format!(
            "{}:{}/{}/{}",
            escaped(self.subject),
            escaped(self.source),
            self.run,
            self.stream
        )
    }

    /// The dedup id of the block of `frames` frames from `first_frame` (a block cut short by a
    /// stop differs from the whole one a resumed publish sends).
    pub(crate) fn block_id(&self, first_frame: u64, frames: usize) -> String {
        format!("{}/b{first_frame}+{frames}", self.prefix())
    }

    /// The dedup id of a message of `rows` rows from frame `first` under the analysis
    /// `fingerprint` (`batch`): the same rows split otherwise are other messages.
    pub(crate) fn batch_id(&self, first: u64, rows: usize, fingerprint: &str) -> String {
        format!("{}/r{first}+{rows}/{fingerprint}", self.prefix())
    }

    /// The dedup id of frame `frame`'s row under the analysis `fingerprint`.
    pub(crate) fn row_id(&self, frame: u64, fingerprint: &str) -> String {
        format!("{}/{frame}/{fingerprint}", self.prefix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin<'a>(subject: &'a str, source: &'a str, run: &'a str) -> Origin<'a> {
        Origin {
            subject,
            source,
            run,
            stream: 0,
        }
    }

    #[test]
    fn ids_differ_when_the_messages_differ() {
        let a = origin("spectra.x", "a:b", "r1").row_id(3, "f");
        assert_ne!(a, origin("spectra.x:a", "b", "r1").row_id(3, "f"));
        assert_ne!(a, origin("spectra.x", "a:b", "r2").row_id(3, "f"));
        assert_ne!(a, origin("spectra.x", "a:b", "r1").row_id(3, "g"));
        assert_ne!(
            origin("s", "x/1", "r").block_id(0, 4),
            origin("s", "x", "1/r").block_id(0, 4)
        );
        assert_eq!(a, origin("spectra.x", "a:b", "r1").row_id(3, "f"));
        assert_eq!(a, "spectra.x:a%3Ab/r1/0/3/f");
        let short = origin("s", "x", "r").block_id(16, 7);
        assert_ne!(short, origin("s", "x", "r").block_id(16, 16));
    }

    #[test]
    fn run_ids_are_new_each_time() {
        let (a, b) = (new_run_id(), new_run_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 16);
        assert!(check_run_id(&a).is_ok());
    }

    #[test]
    fn ids_with_line_breaks_are_refused() {
        assert!(check_id("--source-id", "ok id/with:stuff").is_ok());
        let e = check_id("--source-id", "bad\nid").expect_err("refused");
        assert!(e.contains("bad\\nid"), "{e}");
        assert!(check_id("--source-id", "").is_err());
        assert!(check_run_id("a/b").is_err());
    }
}
