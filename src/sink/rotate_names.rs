//! File names of rotated outputs (`--rotate`): a pattern in `--output`/`--output-dir` rendered
//! for each file from the UTC time of the file's first row and its number in the run.
//!
//! Fields: `%Y` year, `%m` month, `%d` day, `%H` hour, `%M` minute, `%S` second, `%j` day of the
//! year, `%s` seconds since 1970, `%%` a `%`; `{seq}` the file's number in the run (from 0, six
//! digits, so names sort in order). A pattern whose file name has no field gets `-{seq}` before
//! its extension (`spec.npy` → `spec-000000.npy`, `spec-000001.npy`, …; `%Y/spec.npy` →
//! `2026/spec-000000.npy`).

use std::path::{Path, PathBuf};

/// What a `%` may be followed by.
const FIELDS: &str = "YmdHMSjs%";

/// Why a pattern cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum PatternError {
    #[error("{0}: unknown field %{1} in the file-name pattern (fields: %Y %m %d %H %M %S %j %s %% and {{seq}})")]
    UnknownField(String, char),
    #[error("{0}: the file-name pattern is not UTF-8")]
    NotText(String),
    #[error("{0}: a % at the end of the file-name pattern (a % itself is written %%)")]
    TrailingPercent(String),
    #[error("{0}: a {{seq without its closing brace in the file-name pattern (write {{seq}})")]
    UnclosedSeq(String),
}

/// A checked file-name pattern.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NamePattern {
    text: String,
}

impl NamePattern {
    /// Checks `path`'s fields; one whose file name has none gets `-{seq}` before its extension.
    pub(crate) fn new(path: &Path) -> Result<Self, PatternError> {
        let shown = crate::types::shown_path(path);
        let text = path
            .to_str()
            .ok_or_else(|| PatternError::NotText(shown.clone()))?;
        if has_unclosed_seq(text) {
            return Err(PatternError::UnclosedSeq(shown));
        }
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '%' {
                match chars.next() {
                    Some(f) if FIELDS.contains(f) => {}
                    Some(f) => return Err(PatternError::UnknownField(shown, f)),
                    None => return Err(PatternError::TrailingPercent(shown)),
                }
            }
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let text = match has_fields(name) {
            true => text.to_string(),
            false => with_seq(path).display().to_string(),
        };
        Ok(NamePattern { text })
    }

    /// Whether the names hold the file's number (`{seq}`, given or added).
    pub(crate) fn numbered(&self) -> bool {
        self.text.contains("{seq}")
    }

    /// The path of file number `seq` whose first row is at `epoch_s` (seconds since 1970, UTC).
    pub(crate) fn render(&self, epoch_s: f64, seq: u64) -> PathBuf {
        let secs = epoch_s.floor() as i64;
        let (days, day_s) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = crate::types::utc_time::civil_from_days(days);
        let year_start = days - day_of_year_offset(y, days);
        let mut out = String::with_capacity(self.text.len() + 16);
        let text = self.text.replace("{seq}", &format!("{seq:06}"));
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let field = match chars.next() {
                Some('Y') => format!("{y:04}"),
                Some('m') => format!("{m:02}"),
                Some('d') => format!("{d:02}"),
                Some('H') => format!("{:02}", day_s / 3600),
                Some('M') => format!("{:02}", day_s / 60 % 60),
                Some('S') => format!("{:02}", day_s % 60),
                Some('j') => format!("{:03}", days - year_start + 1),
                Some('s') => secs.to_string(),
                _ => "%".to_string(),
            };
            out.push_str(&field);
        }
        PathBuf::from(out)
    }

    /// The deepest folder of the pattern with no field in it (the tests' view of it).
    #[cfg(test)]
    pub(crate) fn literal_folder(&self) -> PathBuf {
        literal_folder(Path::new(&self.text))
    }
}

/// The deepest ancestor folder of `path` with no field in it ("." when none).
pub(crate) fn literal_folder(path: &Path) -> PathBuf {
    let mut folder = PathBuf::new();
    let parent = path.parent().unwrap_or(Path::new(""));
    for part in parent.components() {
        if part.as_os_str().to_str().is_some_and(has_fields) {
            break;
        }
        folder.push(part);
    }
    match folder.as_os_str().is_empty() {
        true => PathBuf::from("."),
        false => folder,
    }
}

/// Whether `text` has a `{seq` that is not `{seq}` nor the start of a longer word (`{sequence}`
/// is a name of the user's, taken as it is).
fn has_unclosed_seq(text: &str) -> bool {
    text.match_indices("{seq").any(|(at, _)| {
        let next = text[at + "{seq".len()..].chars().next();
        !next.is_some_and(|c| c == '}' || c.is_alphanumeric() || c == '_')
    })
}

/// Whether `text` holds a `%` field or `{seq}`.
pub(crate) fn has_fields(text: &str) -> bool {
    text.contains('%') || text.contains("{seq}")
}

/// `path` with `-{seq}` before its extension (or at its end when it has none).
pub(crate) fn with_seq(path: &Path) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    let name = match (stem, path.extension()) {
        (Some(stem), Some(ext)) => format!("{stem}-{{seq}}.{}", ext.to_string_lossy()),
        (Some(stem), None) => format!("{stem}-{{seq}}"),
        _ => "{seq}".to_string(),
    };
    path.with_file_name(name)
}

/// `path` with `-NNNNNN` (`n`, six digits) before its extension, byte for byte (a name that
/// is not UTF-8 stays the name it is: `with_seq`'s pattern is text).
pub(crate) fn numbered(path: &Path, n: u64) -> PathBuf {
    let mut name = path.file_stem().unwrap_or_default().to_os_string();
    name.push(format!("-{n:06}"));
    if let Some(ext) = path.extension() {
        name.push(".");
        name.push(ext);
    }
    path.with_file_name(name)
}

/// Days from 1 January of year `y` to `days` (days since 1970).
fn day_of_year_offset(y: i64, days: i64) -> i64 {
    let mut start = days;
    // walk back to 1 January: at most 365 steps, done once per file
    while crate::types::utc_time::civil_from_days(start - 1).0 == y {
        start -= 1;
    }
    days - start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numbered_name_keeps_every_byte_of_its_path() {
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(b"d\xff/out.csv"));
        let want = std::ffi::OsStr::from_bytes(b"d\xff/out-000007.csv");
        assert_eq!(numbered(path, 7).as_os_str(), want);
        assert_eq!(numbered(Path::new("spec"), 1), Path::new("spec-000001"));
    }

    #[test]
    fn fields_render_from_the_first_rows_utc_time() {
        let p = NamePattern::new(Path::new("data/%Y/%m%d-%H%M%S-{seq}.npy")).unwrap();
        // 2026-11-25 17:07:21 UTC
        let t = 1_795_626_441.5;
        assert_eq!(
            p.render(t, 3),
            PathBuf::from("data/2026/1125-170721-000003.npy")
        );
        assert_eq!(p.literal_folder(), PathBuf::from("data"));
        let j = NamePattern::new(Path::new("%j_%s_%%.csv")).unwrap();
        assert_eq!(j.render(0.0, 0), PathBuf::from("001_0_%.csv"));
        assert_eq!(
            j.render(86_400.0 * 31.0, 0),
            PathBuf::from("032_2678400_%.csv")
        );
    }

    #[test]
    fn a_pattern_without_fields_gets_a_counter() {
        let p = NamePattern::new(Path::new("out/spec.npy")).unwrap();
        assert_eq!(p.render(0.0, 0), PathBuf::from("out/spec-000000.npy"));
        assert_eq!(p.render(0.0, 12), PathBuf::from("out/spec-000012.npy"));
        assert_eq!(p.literal_folder(), PathBuf::from("out"));
        let p = NamePattern::new(Path::new("d/%Y/spec.npy")).unwrap();
        assert_eq!(p.render(0.0, 1), PathBuf::from("d/1970/spec-000001.npy"));
    }

    #[test]
    fn unknown_fields_are_named() {
        let e = NamePattern::new(Path::new("x-%Q.csv")).unwrap_err();
        assert!(e.to_string().contains("unknown field %Q"), "{e}");
        let e = NamePattern::new(Path::new("x-%")).unwrap_err();
        assert!(e.to_string().contains("a % at the end"), "{e}");
    }

    #[test]
    fn an_unclosed_seq_is_refused() {
        let e = NamePattern::new(Path::new("x-{seq.csv")).unwrap_err();
        assert!(
            e.to_string().contains("a {seq without its closing brace"),
            "{e}"
        );
        for bad in ["a-{seq}-{seq.csv", "a-{seq", "{seq-%H.csv"] {
            let e = NamePattern::new(Path::new(bad)).unwrap_err();
            assert_eq!(e, PatternError::UnclosedSeq(bad.into()));
        }
        // a name of the user's that begins the same way is taken as it is
        let p = NamePattern::new(Path::new("{sequence}/a-%H.csv")).unwrap();
        assert_eq!(p.render(0.0, 0), PathBuf::from("{sequence}/a-00.csv"));
    }
}
