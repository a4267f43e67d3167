//! A small file a flag names (a config file, a token, a calibration, credentials, a
//! certificate), read with a bound: `/dev/zero` or a recording named by mistake is an error
//! naming the bound, not a process that fills the machine's memory.

use std::io::{self, Read};
use std::path::Path;

/// The bytes of the file at `path`, at most `most` of them; more is an error.
pub(crate) fn read_at_most(path: &Path, most: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path)?;
    file.take(most.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > most {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {} KiB: not the file meant?", most / 1024),
        ));
    }
    Ok(bytes)
}

/// `read_at_most`, as UTF-8 text.
pub(crate) fn read_text_at_most(path: &Path, most: u64) -> io::Result<String> {
    let bytes = read_at_most(path, most)?;
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_bound_is_an_error_and_a_device_is_read_only_that_far() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.txt");
        std::fs::write(&path, "token\n").expect("write");
        assert_eq!(read_text_at_most(&path, 6).expect("fits"), "token\n");
        let e = read_at_most(&path, 5).expect_err("past the bound");
        assert!(e.to_string().contains("larger than"), "{e}");
        let e = read_at_most(Path::new("/dev/zero"), 4096).expect_err("endless");
        assert!(e.to_string().contains("larger than 4 KiB"), "{e}");
    }
}
