//! The one stop a run cannot drain itself out of: a write to stdout, a FIFO or a device whose
//! reader has stopped reading (`fftd … | sleep 1000`, a FIFO nobody empties). Every write of
//! spectra to such a stream goes through `WatchedFile`, which hands it on in pieces of at most
//! `PIECE` bytes and marks when each began (`writing`); after SIGINT/SIGTERM, `watch` ends the
//! process once one piece has been stuck for `STUCK_AFTER` while a stopped run would otherwise
//! wait on it forever. A reader that reads slowly but reads is never taken for a stuck one, and
//! a regular file (slow storage, stdout redirected to a file) is never watched: its writes end.
//! Files that could be completed were, as far as the stuck write let the run go; the message
//! names the wait. The rows queued for the reader are lost (the last one written may be cut
//! where the reader stopped taking bytes), so the run did not finish: it exits 130
//! (`INTERRUPTED_EXIT`), as a second Ctrl-C does, never 0.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long a write may be stuck after a stop before the process ends without it.
pub(crate) const STUCK_AFTER: Duration = Duration::from_secs(1);

/// `STUCK_AFTER`, or `FFTD_STUCK_WRITE_SECONDS` (a reader known to pause longer after Ctrl-C).
fn stuck_after() -> Duration {
    crate::knobs::stuck_write_seconds().unwrap_or(STUCK_AFTER)
}

/// Milliseconds since `epoch()` at which the write in progress started, plus one; 0 when none is.
static WRITE_STARTED: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The most one watched write hands the kernel at once: a pipe's default capacity, so a
/// reader that takes anything at all lets each piece through.
const PIECE: usize = 1 << 16;

/// An output file whose writes are watched when it is a stream (a FIFO, a pipe, a device, a
/// socket: not a regular file).
pub(crate) struct WatchedFile {
    file: std::fs::File,
    stream: bool,
}

impl WatchedFile {
    pub(crate) fn new(file: std::fs::File) -> Self {
        let stream = file.metadata().map_or(true, |m| !m.is_file());
        WatchedFile { file, stream }
    }

    pub(crate) fn file(&self) -> &std::fs::File {
        &self.file
    }
}

impl std::io::Write for WatchedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.stream {
            return self.file.write(buf);
        }
        let piece = &buf[..buf.len().min(PIECE)];
        writing(|| self.file.write(piece))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Runs `write`, marked as a write in progress (one writer at a time: the sink).
fn writing<R>(write: impl FnOnce() -> R) -> R {
    let started = epoch().elapsed().as_millis() as u64 + 1;
    WRITE_STARTED.store(started, Ordering::Relaxed);
    let result = write();
    WRITE_STARTED.store(0, Ordering::Relaxed);
    result
}

/// How long the write in progress has been going on, if one is.
fn stuck_for() -> Option<Duration> {
    let started = WRITE_STARTED.load(Ordering::Relaxed);
    (started != 0).then(|| {
        let now = epoch().elapsed().as_millis() as u64 + 1;
        Duration::from_millis(now.saturating_sub(started))
    })
}

/// Starts the watch: once `interrupted` is set, a write stuck for `STUCK_AFTER` ends the
/// process with exit 130 and one line on stderr.
pub fn watch(interrupted: Arc<AtomicBool>) {
    epoch();
    let limit = stuck_after();
    let spawned = std::thread::Builder::new()
        .name("fftd-stuck-write".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(50));
            if !interrupted.load(Ordering::Relaxed) {
                continue;
            }
            if stuck_for().is_some_and(|d| d >= limit) {
                eprintln!(
                    "fftd: stopped; the output's reader took nothing for {} s, so the rows still queued for it are left unwritten (the last written may be cut)",
                    limit.as_secs_f64()
                );
                // as a second signal ends it (`types::exit_interrupted`): at once,
                // without flushing a stdout nobody reads or waiting for the stuck thread
                crate::types::exit_interrupted();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch for stuck writes after a stop: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_regular_file_is_written_whole_and_a_pipe_in_watched_pieces() {
        let bytes = vec![7u8; 3 * PIECE + 5];
        let mut file = WatchedFile::new(tempfile::tempfile().expect("tempfile"));
        assert_eq!(file.write(&bytes).expect("write"), bytes.len());
        assert_eq!(WRITE_STARTED.load(Ordering::Relaxed), 0);

        let (mut reader, writer) = std::io::pipe().expect("pipe");
        let drained = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).map(|_| all.len())
        });
        let mut pipe = WatchedFile::new(std::fs::File::from(std::os::fd::OwnedFd::from(writer)));
        assert!(pipe.stream);
        assert!(pipe.write(&bytes).expect("write") <= PIECE);
        // (write_all goes piece by piece, each marked while it lasts)
        pipe.write_all(&bytes).expect("write_all");
        drop(pipe);
        let got = drained.join().expect("reader").expect("read");
        assert!(got > bytes.len() && got <= bytes.len() + PIECE, "{got}");
    }
}
