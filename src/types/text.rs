//! Numbers as fftd writes them in messages and labels.

/// A number as a user would write it (1e300, not 300 digits).
pub fn shown(v: f64) -> String {
    let mut text = ryu::Buffer::new().format(v).to_string();
    if text.ends_with(".0") {
        text.truncate(text.len() - 2);
    }
    text
}
