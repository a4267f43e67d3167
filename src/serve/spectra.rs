//! `/spectra?stream=K&every=N`: the rows themselves as NDJSON over a streaming HTTP response, the
//! same lines `--format ndjson` writes (every row of stream K, or of every stream, keeping those
//! whose frame number is a multiple of N), from the moment of the request until the input ends.
//! Rows this reader missed because it read too slowly are announced in their place with a line
//! `{"skipped":M}`.

use super::hub::{LiveHub, LiveRows};
use axum::body::{Body, Bytes};
use serde::Deserialize;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, Deserialize)]
pub(crate) struct Filter {
    pub stream: Option<usize>,
    pub every: Option<u64>,
}

/// The streaming body of one request (empty once the input has ended).
pub(crate) fn body(hub: Arc<LiveHub>, filter: Filter) -> Body {
    let Some(subscription) = hub.subscribe_rows() else {
        return Body::empty();
    };
    let every = filter.every.unwrap_or(1).max(1);
    let state = (subscription, hub);
    let chunks = futures_util::stream::unfold(state, move |(mut sub, hub)| async move {
        loop {
            let (chunk, sent) = match sub.rx.recv().await {
                Some((skipped, rows)) => {
                    sub.queued_bytes
                        .fetch_sub(rows.bytes.len(), Ordering::Relaxed);
                    lines(skipped, &rows, filter.stream, every)
                }
                // the end: rows skipped after the last batch it got are announced too
                None => (skipped_line(sub.skipped.swap(0, Ordering::Relaxed))?, 0),
            };
            if !chunk.is_empty() {
                hub.serve
                    .spectra_rows_sent
                    .fetch_add(sent, Ordering::Relaxed);
                return Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), (sub, hub)));
            }
        }
    });
    Body::from_stream(chunks)
}

/// The lines of `rows` this reader wants, after a `skipped` line where it missed `skipped`
/// rows just before them; and how many rows they are.
fn lines(skipped: u64, rows: &LiveRows, stream: Option<usize>, every: u64) -> (Vec<u8>, u64) {
    let mut out = skipped_line(skipped).unwrap_or_default();
    let mut sent = 0;
    for row in &rows.rows {
        if stream.is_none_or(|s| s == row.stream) && row.frame % every == 0 {
            out.extend_from_slice(&rows.bytes[row.bytes.clone()]);
            sent += 1;
        }
    }
    (out, sent)
}

/// `{"skipped":M}` when `skipped` rows were missed.
fn skipped_line(skipped: u64) -> Option<Vec<u8>> {
    (skipped > 0).then(|| format!("{{\"skipped\":{skipped}}}\n").into_bytes())
}
