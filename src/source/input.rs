//! Byte input for file sources: a buffered regular file, or a stream (stdin, a FIFO, process
//! substitution's `/dev/fd/N`, a character device, a socket) opened and read by a pump thread so
//! that a stop request (SIGINT, `--duration`, a closed output) is seen within 50 ms even while the
//! open blocks (a FIFO with no writer yet) or no data arrives. A stream is opened once and read
//! once, front to back: nothing is probed and reopened.
//! For streams, sources hand on what has arrived instead of waiting for a full block (`drained`),
//! so a slow producer still gets timely spectra.
//! `peek_start` looks at an input's first bytes (to tell its format) and hands them on to the
//! source that reads it, so even a stream is read once.

use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct InputReader {
    inner: BufReader<Box<dyn Read + Send>>,
    /// The first bytes, read by `peek_start` and not yet consumed (from `peeked_at`).
    peeked: Vec<u8>,
    peeked_at: usize,
    interactive: bool,
    /// A regular file's own handle, for readers that seek (`into_file`).
    file: Option<std::fs::File>,
    /// For stdin: the stop request that ends its reads early.
    stop: Option<Arc<AtomicBool>>,
}

impl InputReader {
    pub fn file(file: std::fs::File) -> Self {
        let own = file.try_clone().ok();
        InputReader {
            file: own,
            ..Self::from_read(file)
        }
    }

    /// A regular file's handle, rewound to its start, for a reader that seeks (an MP4 file's
    /// index may lie at its end); `None` for streams and bytes in memory. This reader is not to
    /// be read after it.
    pub(crate) fn take_file(&mut self) -> Option<std::fs::File> {
        use std::io::Seek;
        let mut file = self.file.take()?;
        file.rewind().ok()?;
        Some(file)
    }

    /// A regular file's handle, to read at an offset without moving this reader; `None` for
    /// streams and bytes in memory.
    pub(crate) fn regular_file(&self) -> Option<&std::fs::File> {
        self.file.as_ref()
    }

    /// Whether this reads a regular file that has nothing (more) to read: its end is where it
    /// is now, not a writer's pause, so a source can say so before the run (an output is
    /// created). A stream's bytes may be on their way: false.
    pub(crate) fn is_regular_file_at_end(&mut self) -> bool {
        self.file.is_some() && self.fill_buf().is_ok_and(|b| b.is_empty())
    }

    /// The bytes a regular file holds past what has been read, so a source can refuse one too
    /// short for a sample before the run; `None` for streams and bytes in memory. Its length
    /// less its handle's offset, plus what was read ahead and not yet handed on.
    pub(crate) fn regular_file_bytes_left(&self) -> Option<u64> {
        use std::io::Seek;
        let mut file: &std::fs::File = self.file.as_ref()?;
        let offset = file.stream_position().ok()?;
        let length = file.metadata().ok()?.len();
        let read_ahead = self.peeked.len() - self.peeked_at + self.inner.buffer().len();
        Some(length.saturating_sub(offset) + read_ahead as u64)
    }

    /// Any byte source read to its end, such as bytes in memory (parser tests) or a pipe.
    pub fn from_read(source: impl Read + Send + 'static) -> Self {
        InputReader {
            inner: BufReader::with_capacity(1 << 16, Box::new(source)),
            peeked: Vec::new(),
            peeked_at: 0,
            interactive: false,
            file: None,
            stop: None,
        }
    }

    /// Standard input, read on a detached pump thread; reads end (EOF) once `stop` is set.
    pub fn stdin(stop: Arc<AtomicBool>) -> Self {
        Self::stream(stop, || Ok(Box::new(io::stdin()) as Box<dyn Read + Send>))
    }

    /// A path that is not a regular file (FIFO, `/dev/fd/N`, device, socket), opened and read
    /// on a detached pump thread: an open that blocks (a FIFO with no writer) or a read that
    /// waits never holds up a stop request. An error opening it is the first read's error.
    pub(crate) fn stream_path(path: &str, stop: Arc<AtomicBool>) -> Self {
        let path = path.to_string();
        Self::stream(stop, move || {
            std::fs::File::open(&path).map(|f| Box::new(f) as Box<dyn Read + Send>)
        })
    }

    /// Bytes from `open()`'s reader, pumped by a detached thread in chunks of what arrives;
    /// reads end (EOF) once `stop` is set.
    fn stream<F>(stop: Arc<AtomicBool>, open: F) -> Self
    where
        F: FnOnce() -> io::Result<Box<dyn Read + Send>> + Send + 'static,
    {
        let (tx, rx) = crossbeam_channel::bounded::<io::Result<Vec<u8>>>(4);
        std::thread::spawn(move || match open() {
            Ok(mut input) => pump(&mut *input, &tx),
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        });
        let pump = StreamPump {
            rx,
            chunk: Vec::new(),
            pos: 0,
            stop: stop.clone(),
        };
        InputReader {
            inner: BufReader::with_capacity(1 << 16, Box::new(pump)),
            peeked: Vec::new(),
            peeked_at: 0,
            interactive: true,
            file: None,
            stop: Some(stop),
        }
    }

    /// True when reading a stream and nothing more is buffered: a source should hand on what
    /// it has rather than block for a full block.
    pub(crate) fn drained(&self) -> bool {
        self.interactive && self.peeked_at >= self.peeked.len() && self.inner.buffer().is_empty()
    }

    /// True for a stream (stdin, a FIFO, ...), false for a regular file or bytes in memory.
    pub(crate) fn is_stream(&self) -> bool {
        self.interactive
    }

    /// The input's first bytes, up to `n`: reads until it has `n`, the input ends, or `wanted`
    /// says the bytes so far decide the question (so a text stream that sends one short line is
    /// not kept waiting). Reads after it still return these bytes first. Only before any read.
    pub(crate) fn peek_start(
        &mut self,
        n: usize,
        wanted: impl Fn(&[u8]) -> bool,
    ) -> io::Result<&[u8]> {
        while self.peeked.len() < n && wanted(&self.peeked) {
            let mut byte = [0u8; 16];
            let want = (n - self.peeked.len()).min(byte.len());
            match self.inner.read(&mut byte[..want]) {
                Ok(0) => break,
                Ok(got) => self.peeked.extend_from_slice(&byte[..got]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(&self.peeked[self.peeked_at..])
    }

    /// True when reads ended because of a stop request rather than the end of the input
    /// (streams only), so a source does not report data cut short by the user as missing.
    pub fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

impl Read for InputReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.peeked_at < self.peeked.len() {
            let rest = &self.peeked[self.peeked_at..];
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.peeked_at += n;
            return Ok(n);
        }
        self.inner.read(buf)
    }
}

impl BufRead for InputReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.peeked_at < self.peeked.len() {
            return Ok(&self.peeked[self.peeked_at..]);
        }
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        if self.peeked_at < self.peeked.len() {
            self.peeked_at = (self.peeked_at + amt).min(self.peeked.len());
            return;
        }
        self.inner.consume(amt)
    }
}

/// Reads `input` to its end in chunks of what arrives, sending each on (a closed receiver ends it).
fn pump(input: &mut dyn Read, tx: &crossbeam_channel::Sender<io::Result<Vec<u8>>>) {
    loop {
        let mut chunk = vec![0u8; 1 << 16];
        match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                chunk.truncate(n);
                if tx.send(Ok(chunk)).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send(Err(e));
                break;
            }
        }
    }
}

/// Chunks from a stream's pump thread.
struct StreamPump {
    rx: Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    pos: usize,
    stop: Arc<AtomicBool>,
}

impl Read for StreamPump {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.chunk.len() {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok(chunk)) => {
                    self.chunk = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
