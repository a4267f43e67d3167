//! Work shards (issue 28): the work stream split over several JetStream streams, each with its
//! own file store, consumer and ingest on the server, so a fleet's samples go in at several
//! streams' byte rate (nats-server stores one stream's messages one at a time).
//!
//! Shard 0 is the work stream as named (`FRAMES`, capturing the work subjects, `frames.>`):
//! a fleet set up before shards existed is a fleet of one shard, read as before. Shard k ≥ 1 is
//! the stream `FRAMES-shardK`, capturing each work subject under the prefix `fftd.shardK.`
//! (`fftd.shard1.frames.>`), with a consumer of the same name and settings and a
//! `FRAMES-shardK_GIVEN_UP` stream of its own. `fftd fleet setup --shards N` creates shards
//! 0 … N−1; a publisher finds them from the subject it is given, a worker from the stream it
//! is given, each asking for shard 1, 2, … until one is missing.
//!
//! `fftd publish` sends block i of a stream to shard (i + stream) mod N: the same block always
//! goes to the same shard (a resumed publish cuts the same blocks), so the shard's duplicate
//! window drops what was stored already. Block ids keep the subject the publisher was given.

use super::connect::one_line;
use super::jetstream::{stream_capturing, LookupError};
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::stream::Stream;
use async_nats::jetstream::{Context, ErrorCode};

/// `fftd fleet setup --shards` unless given: enough streams for the byte rate of a
/// many-core host, few enough that an idle worker's polls cost nothing.
pub(crate) const DEFAULT_SHARDS: usize = 4;
/// The most shards a fleet may have (and a worker or publisher looks for).
pub(crate) const MAX_SHARDS: usize = 64;

/// The name of shard `k` of the work stream `base`.
pub(crate) fn shard_stream(base: &str, k: usize) -> String {
    match k {
        0 => base.to_string(),
        k => format!("{base}-shard{k}"),
    }
}

/// The subject shard `k` captures in place of the work subject `subject`.
pub(crate) fn shard_subject(k: usize, subject: &str) -> String {
    match k {
        0 => subject.to_string(),
        k => format!("fftd.shard{k}.{subject}"),
    }
}

/// The shard of block `index` of stream `stream` among `shards`.
pub(crate) fn shard_of(index: u64, stream: usize, shards: usize) -> usize {
    ((index + stream as u64) % shards.max(1) as u64) as usize
}

/// Whether a stream lookup failed because there is no such stream.
fn stream_missing(e: &async_nats::jetstream::context::GetStreamError) -> bool {
    matches!(e.kind(), GetStreamErrorKind::JetStream(j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND)
        || e.to_string().contains("stream not found")
}

/// Every shard of the work stream `stream` with its pull consumer `consumer`, shard 0 first;
/// one line naming what is missing (shard 0, or a shard's consumer).
pub(crate) async fn work_shards(
    js: &Context,
    stream: &str,
    consumer: &str,
) -> Result<Vec<(Stream, PullConsumer)>, LookupError> {
    let mut shards = vec![super::jetstream::work_consumer(js, stream, consumer).await?];
    for k in 1..MAX_SHARDS {
        let name = shard_stream(stream, k);
        match js.get_stream(&name).await {
            Ok(_) => {}
            Err(e) if stream_missing(&e) => break,
            Err(e) => {
                return Err(LookupError::Failed(format!(
                    "cannot look up JetStream stream '{name}': {}",
                    one_line(&e.to_string())
                )))
            }
        }
        shards.push(super::jetstream::work_consumer(js, &name, consumer).await?);
    }
    Ok(shards)
}

/// The subject of each shard a publisher sends `subject`'s blocks to, shard 0 (`subject`
/// itself) first; one line when no stream captures `subject`.
pub(crate) async fn publish_subjects(
    js: &Context,
    subject: &str,
) -> Result<Vec<String>, LookupError> {
    let base = stream_capturing(js, subject).await?;
    let mut subjects = vec![subject.to_string()];
    for k in 1..MAX_SHARDS {
        let shard = shard_subject(k, subject);
        match stream_capturing(js, &shard).await {
            Ok(name) if name == shard_stream(&base, k) => subjects.push(shard),
            Ok(_) | Err(LookupError::Missing(_)) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(subjects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_zero_is_the_stream_as_named() {
        assert_eq!(shard_stream("FRAMES", 0), "FRAMES");
        assert_eq!(shard_stream("FRAMES", 3), "FRAMES-shard3");
        assert_eq!(shard_subject(0, "frames.>"), "frames.>");
        assert_eq!(shard_subject(2, "frames.site1"), "fftd.shard2.frames.site1");
    }

    #[test]
    fn blocks_go_round_the_shards() {
        let of: Vec<usize> = (0..6).map(|i| shard_of(i, 0, 4)).collect();
        assert_eq!(of, [0, 1, 2, 3, 0, 1]);
        assert_eq!(shard_of(0, 1, 4), 1, "streams start on different shards");
        assert_eq!(shard_of(7, 3, 1), 0);
    }
}
