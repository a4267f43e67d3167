//! Log lines said once per process per key (one line per unsupported size, per device that fell
//! back, ...), for the engines, the router and the host memory they share. A leaf: it imports
//! nothing of `fft`, so any of them can use it without importing another.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// Logs `msg` at info level once per process per key.
pub(crate) fn info_once(key: String, msg: &str) {
    if first_time(key) {
        tracing::info!("{msg}");
    }
}

/// Logs `msg` as a warning once per process per key.
pub(crate) fn warn_once(key: String, msg: &str) {
    if first_time(key) {
        tracing::warn!("{msg}");
    }
}

/// Whether `key` is new to this process (and now seen).
fn first_time(key: String) -> bool {
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(HashSet::new()));
    seen.lock().is_ok_and(|mut s| s.insert(key))
}
