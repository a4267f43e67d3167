//! Payload buffers used again: `fftd publish` encodes every block into a fresh buffer of up to
//! 1 MiB, which the client sends and drops once the server has acknowledged it. Fresh buffers
//! that large come from the system zeroed, page by page (a quarter of the publisher's CPU in a
//! profile); a few kept for the next blocks spare that.

use bytes::Bytes;
use std::sync::{Arc, Mutex};

/// Buffers kept for reuse at most (more are in flight while the window is full; those come
/// back as their acks do).
const KEPT: usize = 16;

/// Buffers handed back by payloads the client has dropped, for the next blocks.
#[derive(Clone, Default)]
pub(crate) struct PayloadPool {
    free: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl PayloadPool {
    /// An empty buffer, one handed back if any.
    pub(crate) fn take(&self) -> Vec<u8> {
        (self.free.lock().ok())
            .and_then(|mut free| free.pop())
            .unwrap_or_default()
    }

    /// `buffer` as a payload whose buffer comes back to this pool once every copy of it is
    /// dropped.
    pub(crate) fn payload(&self, buffer: Vec<u8>) -> Bytes {
        Bytes::from_owner(Pooled {
            buffer,
            free: self.free.clone(),
        })
    }

    /// Buffers waiting to be used again.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.free.lock().map_or(0, |free| free.len())
    }
}

/// A payload's buffer, handed back to its pool when dropped.
struct Pooled {
    buffer: Vec<u8>,
    free: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        if let Ok(mut free) = self.free.lock() {
            if free.len() < KEPT {
                free.push(buffer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_dropped_hands_its_buffer_back_for_the_next() {
        let pool = PayloadPool::default();
        let mut buffer = pool.take();
        buffer.extend_from_slice(&[1, 2, 3]);
        let at = buffer.as_ptr();
        let payload = pool.payload(buffer);
        let copy = payload.clone();
        drop(payload);
        assert_eq!(pool.kept(), 0, "a copy is still in flight");
        assert_eq!(&copy[..], &[1, 2, 3]);
        drop(copy);
        assert_eq!(pool.kept(), 1);
        let again = pool.take();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), at, "the same buffer");
    }

    #[test]
    fn at_most_a_few_buffers_are_kept() {
        let pool = PayloadPool::default();
        let payloads: Vec<Bytes> = (0..KEPT + 5).map(|_| pool.payload(vec![0; 8])).collect();
        drop(payloads);
        assert_eq!(pool.kept(), KEPT);
    }
}
