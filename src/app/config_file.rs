//! Reading a `--config` TOML file into `config::Options`, and its errors as a user reads them:
//! every one a usage error (exit 2) naming the file and line, the key and what the key takes, in
//! the words of the help text ("a whole number", "one of rect, hann, ..."), never serde's type
//! names (`i64`, `FrameSize`); the value is echoed cut to 60 characters. Errors found later, when
//! the file's values meet the flags' (`hop = 0`, a key that conflicts with a flag), are placed in
//! the file by `ConfigFile::place`.

use crate::app::options::Options;
use crate::error::{shorten_echoes, FftdError, Result};
use crate::types::escaped;
use std::path::{Path, PathBuf};

/// Characters of a value echoed in an error; longer ones end in "…".
const ECHO_CHARS: usize = 60;

/// A config file read: its options, and the line each of its keys is set on, for the errors
/// found when its values meet the flags' (`Settings::resolve`).
#[derive(Clone, Debug)]
pub(crate) struct ConfigFile {
    pub(crate) options: Options,
    path: PathBuf,
    key_lines: Vec<(String, usize)>,
}

impl ConfigFile {
    /// Reads a config file; unreadable, not UTF-8, unknown keys and wrong types are usage errors
    /// naming the file (and line and key).
    pub(crate) fn read(path: &Path) -> Result<ConfigFile> {
        let text = read_text(path)?;
        let options = parse_config(&text, path)?;
        Ok(ConfigFile {
            options,
            path: path.to_path_buf(),
            key_lines: key_lines(&text),
        })
    }

    /// `message`, a usage error about the merged options, placed in this file when the first
    /// flag it names whose value came from here (`from_file`, kebab-case keys) is set in it:
    /// `PATH:LINE: KEY = VALUE: ...` where the message starts `--KEY VALUE: `, else the message
    /// with `(KEY is set in PATH:LINE)` after it. Other messages are left as they are.
    pub(crate) fn place(&self, message: &str, from_file: &[String]) -> String {
        let named = flags_named(message).find_map(|flag| {
            let key = flag.strip_prefix("--")?;
            let line = self
                .line_of(key)
                .filter(|_| from_file.iter().any(|k| k == key))?;
            Some((flag, key, line))
        });
        let Some((flag, key, line)) = named else {
            return message.to_string();
        };
        let at = format!("{}:{line}", crate::types::shown_path(&self.path));
        let valued = |rest: &&str| rest.split(' ').next().is_some_and(|v| v.ends_with(':'));
        match message
            .strip_prefix(flag)
            .and_then(|m| m.strip_prefix(' '))
            .filter(valued)
        {
            Some(rest) => format!("{at}: {key} = {rest}"),
            None => format!("{message} ({key} is set in {at})"),
        }
    }

    /// The file's path, as given.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn line_of(&self, key: &str) -> Option<usize> {
        self.key_lines.iter().find(|(k, _)| k == key).map(|k| k.1)
    }
}

/// Reads a config file, at most 16 MiB; not UTF-8 is an error naming the line.
fn read_text(path: &Path) -> Result<String> {
    let shown = crate::types::shown_path(path);
    // (bounded: a config file is a few KiB, and /dev/zero named by mistake never ends)
    let bytes = crate::types::small_file::read_at_most(path, 16 << 20)
        .map_err(|e| FftdError::Usage(format!("--config {shown}: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
        FftdError::Usage(format!(
            "{shown}:{line}: not UTF-8 text (a config file is TOML, which is UTF-8)"
        ))
    })
}

/// Each top-level key of `text` (which parses) and the line it is on.
fn key_lines(text: &str) -> Vec<(String, usize)> {
    let Ok(table) = toml::de::DeTable::parse(text) else {
        return Vec::new();
    };
    let line = |at: usize| text[..floor_boundary(text, at)].matches('\n').count() + 1;
    let lines = table
        .get_ref()
        .iter()
        .map(|(key, _)| (key.get_ref().to_string(), line(key.span().start)));
    lines.collect()
}

/// The `--flag` words of `message`, in order.
fn flags_named(message: &str) -> impl Iterator<Item = &str> {
    let flag_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    message.match_indices("--").filter_map(move |(at, _)| {
        let before = message[..at].chars().next_back();
        if before.is_some_and(flag_char) {
            return None; // inside a word, or the second dash of a longer run
        }
        let end = message[at..]
            .find(|c| !flag_char(c))
            .map_or(message.len(), |e| at + e);
        let name = message[at..end].trim_end_matches('-');
        (name.len() > 2 && !name[2..].starts_with('-')).then_some(name)
    })
}

/// Parses config-file text; `path` names the file in errors (`PATH:LINE: ...`).
pub fn parse_config(text: &str, path: &Path) -> Result<Options> {
    toml::from_str(text).map_err(|e| {
        let message = e.message().replace('\n', " ");
        let place = match e.span() {
            Some(span) => Place::of(text, span),
            None => Place::default(),
        };
        let line = match place.line {
            Some(line) => format!("{}:{line}", crate::types::shown_path(path)),
            None => crate::types::shown_path(path).to_string(),
        };
        FftdError::Usage(shorten_echoes(&format!("{line}: {}", place.say(&message))))
    })
}

/// Where in the file an error points: its line, and the key and value text when it points at
/// a value (`key = value`).
#[derive(Default)]
struct Place {
    line: Option<usize>,
    key_value: Option<(String, String)>,
    /// The text the error points at (a key given twice: the key).
    pointed: String,
}

impl Place {
    fn of(text: &str, span: std::ops::Range<usize>) -> Place {
        let start = floor_boundary(text, span.start);
        let end = floor_boundary(text, span.end.max(start));
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line = text[..start].matches('\n').count() + 1;
        let before = &text[line_start..start];
        let key_value = before.find('=').map(|eq| {
            let key = before[..eq].trim().to_string();
            (key, text[start..end].trim().to_string())
        });
        Place {
            line: Some(line),
            key_value,
            pointed: text[start..end].trim().to_string(),
        }
    }

    /// The error in words: `key = value: expected WHAT` for a wrong value, else toml's message
    /// with the key named.
    fn say(&self, message: &str) -> String {
        if let Some(key) = message
            .strip_prefix("unknown field `")
            .and_then(|m| m.split('`').next())
        {
            return format!(
                "unknown key '{}' (the keys are the long flag names: {})",
                echo(key),
                known_keys()
            );
        }
        if message.starts_with("duplicate key") && !self.pointed.is_empty() {
            return format!("{} is given twice (once per file)", echo(&self.pointed));
        }
        let Some((key, value)) = &self.key_value else {
            return message.to_string();
        };
        let value = echo(&value.replace(['\n', '\r'], " "));
        match expectation(message) {
            Some(wanted) => format!("{key} = {value}: expected {}", takes(key, wanted)),
            None => format!("{key} = {value}: {message}"),
        }
    }
}

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `text` cut to `ECHO_CHARS` characters, its control characters written out (`\x1b`).
fn echo(text: &str) -> String {
    match text.char_indices().nth(ECHO_CHARS) {
        Some((at, _)) => format!("{}…", escaped(&text[..at])),
        None => escaped(text).into_owned(),
    }
}

/// What serde or toml says was expected, when the message is about a value of the wrong type
/// or an unknown choice.
fn expectation(message: &str) -> Option<&str> {
    // toml's words for an enumerated key given a number or a table
    if message.starts_with("wanted ") {
        return Some("");
    }
    if let Some(rest) = message.strip_prefix("expected ") {
        return Some(rest);
    }
    let typed = message.starts_with("invalid type: ")
        || message.starts_with("unknown variant ")
        || message.starts_with("invalid value: ");
    match typed {
        true => message.rsplit_once(", expected ").map(|(_, wanted)| wanted),
        false => None,
    }
}

/// What `key` takes, in the help text's words: serde's type names translated; the choices of an
/// enumerated key from its flag's definition.
fn takes(key: &str, wanted: &str) -> String {
    let whole = [
        "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
    ];
    match wanted {
        w if whole.contains(&w) => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "path string" => "a path (a string)".into(),
        "a sequence" => "a list of strings, such as [\"a.wav\", \"b.wav\"]".into(),
        "" => match choices(key) {
            Some(choices) => format!("one of {choices}"),
            None => "a string".into(),
        },
        w => w.replace('`', ""),
    }
}

/// The clap definition of `key`'s flag (`Options` is both).
fn flag_of(key: &str) -> Option<clap::Arg> {
    use clap::Args;
    let cmd = Options::augment_args(clap::Command::new("fftd"));
    let id = key.replace('-', "_");
    let arg = cmd
        .get_arguments()
        .find(|a| a.get_id() == id.as_str())
        .cloned();
    arg
}

/// "rect, hann, ..." for a key whose flag takes one of a fixed set of values.
fn choices(key: &str) -> Option<String> {
    let names: Vec<String> = flag_of(key)?
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    (!names.is_empty()).then(|| names.join(", "))
}

/// Every config key, in `--help` order.
fn known_keys() -> String {
    use clap::Args;
    let cmd = Options::augment_args(clap::Command::new("fftd"));
    let keys: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
    keys.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse_config(text, Path::new("c.toml"))
            .expect_err(text)
            .to_string()
    }

    /// config/fftd.toml "lists every key with its default and a comment" (README): each key
    /// there, set or commented out, and the file parses as it is.
    #[test]
    fn the_bundled_config_names_every_key() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/fftd.toml");
        let text = std::fs::read_to_string(&path).expect("config/fftd.toml");
        let named = |key: &str| {
            let set = |line: &str| line.strip_prefix(key).is_some_and(|r| r.starts_with(" ="));
            text.lines()
                .any(|line| set(line) || line.strip_prefix("# ").is_some_and(set))
        };
        let missing: Vec<_> = known_keys()
            .split(", ")
            .filter(|key| !named(key))
            .map(str::to_string)
            .collect();
        assert!(missing.is_empty(), "config/fftd.toml lacks {missing:?}");
        // every commented-out example is a value the key takes
        let examples: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| {
                known_keys()
                    .split(", ")
                    .any(|k| l.strip_prefix(k).is_some_and(|r| r.starts_with(" =")))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        for line in examples.lines() {
            parse_config(line, Path::new("example.toml")).unwrap_or_else(|e| panic!("{line}: {e}"));
        }
    }

    #[test]
    fn messages_name_the_key_and_what_it_takes_in_plain_words() {
        let cases = [
            (
                "hop = \"many\"",
                "c.toml:1: hop = \"many\": expected a whole number",
            ),
            (
                "rate = \"fast\"",
                "c.toml:1: rate = \"fast\": expected a number",
            ),
            (
                "\nfftshift = 1",
                "c.toml:2: fftshift = 1: expected true or false",
            ),
            ("file = 3", "c.toml:1: file = 3: expected a list of strings"),
            (
                "window = 3",
                "c.toml:1: window = 3: expected one of rect, hann,",
            ),
            (
                "window = \"kaiser\"",
                "window = \"kaiser\": expected one of rect, hann",
            ),
            ("frame = 1.5", "frame = 1.5: expected a number of samples"),
            (
                "channel = -1",
                "channel = -1: expected \"mix\", \"all\" or a channel",
            ),
            (
                "fram = 3",
                "c.toml:1: unknown key 'fram' (the keys are the long flag names: file,",
            ),
            (
                "rate = nan",
                "c.toml:1: rate = nan: expected a finite number",
            ),
            (
                "\n\ntone = -inf",
                "c.toml:3: tone = -inf: expected a finite number",
            ),
            (
                "hop = 99999999999999999999",
                "hop = 99999999999999999999: expected a whole",
            ),
            // an empty path failed the run with ": No such file" (helper-42)
            (
                "\nmeta = \"\"",
                "c.toml:2: meta = \"\": a path is required, not \"\"",
            ),
            (
                "output = 5",
                "c.toml:1: output = 5: expected a path, as text",
            ),
        ];
        for (text, want) in cases {
            let got = error(text);
            assert!(got.contains(want), "{text}: {got}");
        }
    }

    #[test]
    fn no_internal_type_name_in_any_message() {
        let values = [
            "\"x\"",
            "1",
            "-1",
            "1.5",
            "true",
            "[]",
            "[1]",
            "{}",
            "99999999999999999999",
        ];
        let internal = [
            "expected i64",
            "expected f64",
            "expected u",
            "i128",
            "FrameSize",
            "AverageSpec",
            "AverageMode",
            "BandSpec",
            "ChannelSelect",
            "DeviceChoice",
            "PngSize",
            "DbRange",
            "Options",
            "variant",
            "field",
            "sequence",
            "struct",
            "enum ",
            "wanted",
        ];
        for key in known_keys().split(", ") {
            for value in values {
                let text = format!("{key} = {value}\n");
                let Err(e) = parse_config(&text, Path::new("c.toml")) else {
                    continue;
                };
                let msg = e.to_string();
                assert!(msg.contains(key), "{text}: {msg}");
                for name in internal {
                    assert!(!msg.contains(name), "{text}: '{name}' in {msg}");
                }
            }
        }
    }

    #[test]
    fn errors_about_the_files_values_are_placed_in_it() {
        let text = "frame = 64\n\n  hop = 0\n\"output-dir\" = \"d\"\ngain = 3\n";
        let file = ConfigFile {
            options: parse_config(text, Path::new("c.toml")).expect("parses"),
            path: "c.toml".into(),
            key_lines: key_lines(text),
        };
        let from_file: Vec<String> = ["frame", "hop", "output-dir", "gain"]
            .map(String::from)
            .to_vec();
        let cases = [
            ("--hop 0: must be more", "c.toml:3: hop = 0: must be more"),
            (
                "use either --output or --output-dir, not both",
                "use either --output or --output-dir, not both (output-dir is set in c.toml:4)",
            ),
            (
                "--gain sets a receiver's gain: give --file",
                "--gain sets a receiver's gain: give --file (gain is set in c.toml:5)",
            ),
            // named first, but given as a flag: the next key named from the file is placed
            (
                "--file x: --frame 64 too long",
                "--file x: --frame 64 too long (frame is set in c.toml:1)",
            ),
            ("no flag named", "no flag named"),
            ("---hop 0: odd", "---hop 0: odd"),
        ];
        for (message, want) in cases {
            assert_eq!(file.place(message, &from_file), want);
        }
        // a key the flag set (not among `from_file`) is never placed in the file
        assert_eq!(file.place("--hop 0: x", &[]), "--hop 0: x");
    }

    #[test]
    fn long_values_are_echoed_cut() {
        let long = "x".repeat(1 << 20);
        for text in [
            format!("frame = \"{long}\""),
            format!("hop = \"{long}\""),
            format!("device = \"{long}\""),
            format!("{long} = 1"),
        ] {
            let msg = error(&text);
            assert!(msg.len() < 800, "{} chars: {}", msg.len(), &msg[..200]);
            assert!(msg.contains('…'), "{msg}");
        }
    }
}
