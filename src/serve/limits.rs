//! What each live-view connection is doing, for its timeouts and the connection cap.
//!
//! Every accepted connection holds one of `--serve-max-connections` permits for as long as its
//! socket lives (a WebSocket session too: the permit travels inside the socket's wrapper,
//! `Timed`). A connection's `Clock` says whether it is waiting for a request head (since when,
//! and since when bytes of it have come) or serving requests; `deadline` turns that into the
//! moment it is closed. When every permit is taken, a newcomer evicts the connection that has
//! waited longest without sending a whole request, so idle or slowloris connections cannot lock
//! viewers out.

use super::options::Timeouts;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit};

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Waiting for a request head: since when, when its first byte came, whether it would be
    /// the connection's first request.
    Waiting {
        since: Instant,
        first_byte: Option<Instant>,
        fresh: bool,
    },
    /// Requests in flight (a response still being written counts).
    Busy(usize),
    /// Handed over to a WebSocket session, which has timeouts of its own.
    Upgraded,
    /// Chosen to make room for a newcomer, or shutting down: to be closed now.
    Evicted,
}

/// One connection's state; shared by its socket wrapper, its requests and the registry.
pub(super) struct Clock {
    phase: Mutex<Phase>,
    /// Told on every change of phase.
    pub changed: Notify,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            phase: Mutex::new(Phase::Waiting {
                since: Instant::now(),
                first_byte: None,
                fresh: true,
            }),
            changed: Notify::new(),
        }
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        // (a panic while holding it cannot leave a torn Phase: it is Copy)
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, phase: Phase) {
        *self.phase() = phase;
        self.changed.notify_waiters();
    }

    /// Bytes have been read from the socket.
    fn read_bytes(&self) {
        if let Phase::Waiting {
            first_byte: first @ None,
            ..
        } = &mut *self.phase()
        {
            *first = Some(Instant::now());
        }
    }

    /// A request head has been read whole: its response is being made.
    pub(super) fn begin(&self) {
        let mut phase = self.phase();
        *phase = match *phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            Phase::Evicted => Phase::Evicted,
            _ => Phase::Busy(1),
        };
        drop(phase);
        self.changed.notify_waiters();
    }

    /// A response has been written whole (or given up).
    pub(super) fn end(&self) {
        let mut phase = self.phase();
        *phase = match *phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            Phase::Busy(_) => Phase::Waiting {
                since: Instant::now(),
                first_byte: None,
                fresh: false,
            },
            other => other,
        };
        drop(phase);
        self.changed.notify_waiters();
    }

    /// The connection is a WebSocket session now.
    pub(super) fn upgraded(&self) {
        self.set(Phase::Upgraded);
    }

    /// Whether it is waiting for a request (so may be closed at once on shutdown).
    pub(super) fn waiting(&self) -> bool {
        matches!(*self.phase(), Phase::Waiting { .. } | Phase::Evicted)
    }

    /// When the connection is to be closed: `Some(now or earlier)` if at once, `None` while
    /// requests are in flight.
    pub(super) fn deadline(&self, t: &Timeouts) -> Option<Instant> {
        match *self.phase() {
            Phase::Waiting {
                since,
                first_byte,
                fresh,
            } => Some(match (fresh, first_byte) {
                (true, _) => since + t.header,
                (false, Some(first)) => first + t.header,
                (false, None) => since + t.idle,
            }),
            Phase::Busy(_) | Phase::Upgraded => None,
            Phase::Evicted => Some(Instant::now()),
        }
    }

    /// Ends when the connection's deadline has passed (or it was evicted).
    pub(super) async fn expired(&self, t: &Timeouts) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.deadline(t) {
                Some(at) if at <= Instant::now() => return,
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at.into()) => {}
                        _ = changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

/// Every open connection's clock, to pick one to evict.
#[derive(Default)]
pub(super) struct Registry {
    clocks: Mutex<HashMap<u64, Arc<Clock>>>,
    next: AtomicU64,
}

impl Registry {
    fn clocks(&self) -> MutexGuard<'_, HashMap<u64, Arc<Clock>>> {
        self.clocks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection's entry; it leaves the registry (and gives its permit back) when dropped.
    pub(super) fn enter(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Entry {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let clock = Arc::new(Clock::new());
        self.clocks().insert(id, clock.clone());
        Entry {
            id,
            clock,
            registry: self.clone(),
            _permit: permit,
        }
    }

    /// Marks the connection that has waited longest for a whole request head to be closed;
    /// false when every connection is serving requests or sessions (none is waiting or being
    /// closed), so no place will come free soon.
    pub(super) fn evict_oldest_waiting(&self) -> bool {
        let clocks = self.clocks();
        let closing = clocks
            .values()
            .any(|c| matches!(*c.phase(), Phase::Evicted));
        let oldest = clocks
            .values()
            .filter_map(|c| match *c.phase() {
                Phase::Waiting { since, .. } => Some((since, c)),
                _ => None,
            })
            .min_by_key(|(since, _)| *since);
        match oldest {
            Some((_, clock)) => {
                clock.set(Phase::Evicted);
                true
            }
            None => closing,
        }
    }
}

/// A connection's place in the registry and its permit.
pub(super) struct Entry {
    id: u64,
    pub clock: Arc<Clock>,
    registry: Arc<Registry>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.registry.clocks().remove(&self.id);
    }
}

/// A socket that tells its clock when bytes come in, and holds the connection's permit for as
/// long as it lives.
pub(super) struct Timed<S> {
    inner: S,
    entry: Entry,
}

impl<S> Timed<S> {
    pub(super) fn new(inner: S, entry: Entry) -> Timed<S> {
        Timed { inner, entry }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Timed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.entry.clock.read_bytes();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Timed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
