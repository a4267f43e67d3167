//! Numbers as fftd writes them in messages and labels, and text from the user (a line of input,
//! a flag's value, a device's name) made safe to quote in a message.

use std::borrow::Cow;
use std::fmt::Write;

/// A number as a user would write it (1e300, not 300 digits).
pub fn shown(v: f64) -> String {
    let mut text = ryu::Buffer::new().format(v).to_string();
    if text.ends_with(".0") {
        text.truncate(text.len() - 2);
    }
    text
}

/// `text` with its control characters written out, so a message quoting it stays one line a
/// terminal shows whole and a log keeps: NUL as `\0`, tab `\t`, newline `\n`, carriage return
/// `\r`, every other C0 control, DEL and the C1 controls (U+0080–U+009F) as `\xNN` (ESC is
/// `\x1b`). Anything else, backslashes included, is kept, so escaping twice changes nothing.
pub fn escaped(text: &str) -> Cow<'_, str> {
    // `char::is_control` is Unicode's Cc: exactly C0, DEL and C1
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\0' => out.push_str("\\0"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A path as a message shows it: its UTF-8 text `escaped`, and each byte that is not UTF-8 as
/// `\xNN` (`Path::display` would show U+FFFD in its place, naming no file there is).
pub fn shown_path(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(&escaped(chunk.valid()));
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_shows_its_bytes_that_are_not_utf8_and_its_controls_escaped() {
        use std::os::unix::ffi::OsStrExt;
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(b"/t/\xe9t\xc3\xa9\n.f32"));
        assert_eq!(shown_path(path), "/t/\\xe9t\u{e9}\\n.f32");
        assert_eq!(shown_path(std::path::Path::new("a b.wav")), "a b.wav");
    }

    #[test]
    fn control_characters_are_written_out() {
        assert_eq!(escaped("0.25\0x"), "0.25\\0x");
        assert_eq!(escaped("a\x1b[31mb"), "a\\x1b[31mb");
        assert_eq!(escaped("a\tb\nc\rd"), "a\\tb\\nc\\rd");
        assert_eq!(
            escaped("\x01\x07\x7f\u{85}\u{9b}"),
            "\\x01\\x07\\x7f\\x85\\x9b"
        );
    }

    #[test]
    fn other_text_is_kept_as_it_is() {
        for text in [
            "",
            "0.25",
            "hw:CARD=USB,DEV=0",
            "µ é 日本 \u{a0}\u{a0}",
            "C:\\x1b",
        ] {
            assert!(
                matches!(escaped(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
    }

    #[test]
    fn escaping_twice_changes_nothing() {
        let once = escaped("x\0\x1b\u{9f}\n").into_owned();
        assert_eq!(escaped(&once), once);
        assert!(!once.chars().any(|c| c.is_control()), "{once}");
    }
}
