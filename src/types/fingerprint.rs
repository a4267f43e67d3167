//! A short name for a text that stays the same on every host and in every fftd version (unlike
//! std's hashers, whose output may change between Rust releases): for cache files' and lock
//! files' names and a fleet's analysis ids.

/// 16 hex digits: FNV-1a (64 bit) of `text`.
pub(crate) fn fingerprint(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_fnv1a() {
        // FNV-1a 64 of "" and "a" (published test vectors)
        assert_eq!(fingerprint(""), "cbf29ce484222325");
        assert_eq!(fingerprint("a"), "af63dc4c8601ec8c");
        assert_ne!(fingerprint("n=512"), fingerprint("n=256"));
    }
}
