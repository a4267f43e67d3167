//! fftd's error type and the one place errors become a message and an exit code:
//! 0 ok, 1 runtime error, 2 usage error.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum FftdError {
    /// Bad command line or config: exit 2.
    #[error("{0}")]
    Usage(String),
    /// Bad input data: names the file, and the line or offset where it applies.
    #[error("{path}: {what}")]
    Input { path: String, what: String },
    /// An I/O failure on a named path.
    #[error("{}: {source}", crate::types::shown_path(path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Anything else that went wrong while running: exit 1.
    #[error("{0}")]
    Runtime(String),
    /// SIGINT/SIGTERM ended a run before it could start (a FIFO waiting for its other end):
    /// said on stderr, exit 0 as for any interrupted run.
    #[error("{0}")]
    Stopped(String),
}

impl FftdError {
    pub fn exit_code(&self) -> i32 {
        match self {
            FftdError::Usage(_) => 2,
            FftdError::Stopped(_) => 0,
            _ => 1,
        }
    }

    pub fn input(path: impl Into<String>, what: impl Into<String>) -> Self {
        FftdError::Input {
            path: path.into(),
            what: what.into(),
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FftdError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = FftdError> = std::result::Result<T, E>;

/// Words (runs without whitespace) longer than this in a message are cut (`shorten_echoes`).
const LONGEST_WORD: usize = 200;
/// Messages longer than this keep their start and end (`shorten_echoes`).
const LONGEST_MESSAGE: usize = 2000;

/// `message` with the values it echoes made safe and cut to a readable length: control
/// characters written out (`types::escaped`: `\0`, `\x1b`, …, so the message stays one line
/// whatever a quoted value held), a word over 200 characters keeps its first 80 (and closing
/// punctuation) followed by "…", and a message still over 2000 keeps its first 1200 and last
/// 400 characters. A 100 MB config value is never printed whole.
pub fn shorten_echoes(message: &str) -> String {
    let message = crate::types::escaped(message);
    let message = message.as_ref();
    let mut out = String::with_capacity(message.len().min(LONGEST_MESSAGE + 8));
    let mut rest = message;
    while !rest.is_empty() {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, tail) = rest.split_at(end);
        out += &shorten_word(word);
        let spaces = tail.len() - tail.trim_start().len();
        out += &tail[..spaces];
        rest = &tail[spaces..];
    }
    let chars = out.chars().count();
    if chars <= LONGEST_MESSAGE {
        return out;
    }
    let head: String = out.chars().take(1200).collect();
    let end: String = out.chars().skip(chars - 400).collect();
    format!("{head} … {end}")
}

fn shorten_word(word: &str) -> std::borrow::Cow<'_, str> {
    if word.chars().count() <= LONGEST_WORD {
        return word.into();
    }
    let closing: String = {
        let tail: Vec<char> = word
            .chars()
            .rev()
            .take_while(|c| matches!(c, '\'' | '"' | '`' | ':' | ',' | ')' | ';'))
            .take(3)
            .collect();
        tail.into_iter().rev().collect()
    };
    let head: String = word.chars().take(80).collect();
    format!("{head}…{closing}").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_echoes_are_cut_short_ones_kept() {
        let short = "c.toml:1: frame = \"big\": expected a number";
        assert_eq!(shorten_echoes(short), short);
        let long = format!("--average {}: must be a number", "x".repeat(10_000));
        let cut = shorten_echoes(&long);
        assert_eq!(
            cut,
            format!("--average {}…: must be a number", "x".repeat(80))
        );
        let quoted = format!("invalid device '{}': expected auto", "y".repeat(500));
        assert!(shorten_echoes(&quoted).ends_with("…': expected auto"));
        let spaced = format!("bad '{}' end", "a ".repeat(100_000));
        let cut = shorten_echoes(&spaced);
        assert!(cut.len() < 1700 * 4 && cut.starts_with("bad 'a a") && cut.ends_with("' end"));
    }

    #[test]
    fn control_characters_in_echoes_are_written_out() {
        let message = "in.txt: line 2: cannot read '0.25\0\x1b[2J' as a number\n";
        assert_eq!(
            shorten_echoes(message),
            "in.txt: line 2: cannot read '0.25\\0\\x1b[2J' as a number\\n"
        );
        let long = format!("--average {}\u{9b}: bad", "x".repeat(300));
        assert!(!shorten_echoes(&long).chars().any(char::is_control));
    }
}
