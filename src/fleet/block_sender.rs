//! `fftd publish`'s way out: cut blocks collected into small batches, one batch being filled per
//! shard of the work stream (`shards`: block i of a stream goes to shard (i + stream) mod N),
//! each shard's batches published with acks on the client's runtime (`publish_acked::Publishing`)
//! within a window of its own, so every shard's store works at once and memory stays bounded.
//!
//! Each shard publishes on a connection of its own when it has one (`fftd publish
//! --connections`, default one per shard; shard k uses connection k mod C): nats-server stores
//! what a client publishes in that client's read loop, one message after another, so on one
//! connection the shards' stores take turns on one server core however many shards there are.

use super::cutter::CutBlock;
use super::outage::Outages;
use super::publish_acked::{Acked, InFlightLimit, Outgoing, Publishing};
use super::shards::shard_of;
use crate::error::{FftdError, Result};
use async_nats::jetstream::Context;
use std::sync::Arc;
use tokio::runtime::Runtime;

/// Blocks per published batch: small, so acks are collected as they come and a shard's window
/// slides a few blocks at a time.
const BATCH_BLOCKS: usize = 2;
/// The window of publishes awaiting their acks, per shard: up to 16 batches and 16 MiB (about
/// 16 default blocks of up to 1 MiB each). The next blocks are sent while earlier ones are
/// stored, so the server's byte rate, not a round trip per block, paces the publish.
const IN_FLIGHT: InFlightLimit = InFlightLimit {
    batches: 16,
    bytes: 16 << 20,
};

/// What was published, for `--stats`.
#[derive(Default)]
pub(crate) struct Published {
    pub blocks: u64,
    pub frames: u64,
    pub samples: u64,
}

/// One shard's batch being filled and its batches on their way.
struct Shard {
    publishing: Publishing,
    batch: Vec<Outgoing>,
}

/// Collects blocks into batches and publishes them on the runtime, a few batches at a time.
pub(crate) struct BlockSender<'a> {
    rt: &'a Runtime,
    /// The subject the publisher was given: block ids name it, whatever shard they go to.
    subject: String,
    shards: Vec<Shard>,
    /// Connections the shards publish on.
    connections: usize,
    pub published: Published,
    /// A batch that could not be published: the cutters stop, the publish fails.
    failed: Option<FftdError>,
}

impl<'a> BlockSender<'a> {
    /// Blocks for `subject` sent to `shard_subjects` (`shards::publish_subjects`, shard 0 first),
    /// shard k on connection `connections[k mod C]` (at least one). Failures are retried as
    /// `outages` says.
    pub(crate) fn new(
        rt: &'a Runtime,
        connections: &[Context],
        (subject, shard_subjects): (String, Vec<String>),
        outages: Arc<Outages>,
    ) -> Self {
        let shards: Vec<Shard> = shard_subjects
            .into_iter()
            .zip(connections.iter().cycle())
            .map(|(s, js)| Shard {
                publishing: Publishing::new(js.clone(), s, IN_FLIGHT, outages.clone()),
                batch: Vec::new(),
            })
            .collect();
        BlockSender {
            rt,
            subject,
            connections: connections.len().min(shards.len()),
            shards,
            published: Published::default(),
            failed: None,
        }
    }

    /// The subject the publisher was given.
    pub(crate) fn subject(&self) -> &str {
        &self.subject
    }

    /// How many connections the shards publish on.
    pub(crate) fn connection_count(&self) -> usize {
        self.connections
    }

    /// How many shards the blocks are spread over.
    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Takes a block; sends its shard's batch once it is full. False (stop cutting) once a
    /// batch failed.
    pub(crate) fn add(&mut self, block: CutBlock) -> bool {
        if self.failed.is_some() {
            return false;
        }
        self.published.blocks += 1;
        self.published.frames += block.header.frames as u64;
        self.published.samples += block.header.samples as u64;
        let k = shard_of(block.index, block.header.shape.stream, self.shards.len());
        let shard = &mut self.shards[k];
        shard.batch.push(Outgoing {
            headers: block.header.to_headers(&self.subject),
            payload: block.payload,
        });
        if shard.batch.len() >= BATCH_BLOCKS {
            let batch = std::mem::take(&mut shard.batch);
            if let Err(e) = shard.publishing.send(self.rt, batch) {
                self.failed = Some(e);
                return false;
            }
        }
        true
    }

    /// Whether a batch failed (`add` stops).
    pub(crate) fn failed(&self) -> bool {
        self.failed.is_some()
    }

    /// The error that stopped `add`, if any.
    pub(crate) fn take_failure(&mut self) -> Result<()> {
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether nothing is collected or awaiting acks.
    pub(crate) fn is_idle(&self) -> bool {
        (self.shards.iter()).all(|s| s.batch.is_empty() && s.publishing.is_idle())
    }

    /// Sends every shard's collected blocks; waits while too many batches are in flight.
    pub(crate) fn flush(&mut self) -> Result<()> {
        for shard in &mut self.shards {
            let batch = std::mem::take(&mut shard.batch);
            shard.publishing.send(self.rt, batch)?;
        }
        Ok(())
    }

    /// Sends what is collected and waits until every block sent is acknowledged.
    pub(crate) fn settle_all(&mut self) -> Result<()> {
        self.flush()?;
        for shard in &mut self.shards {
            shard.publishing.settle_all(self.rt)?;
        }
        Ok(())
    }

    /// What the server said of the blocks acknowledged so far, over every shard.
    pub(crate) fn acked(&self) -> Acked {
        let mut all = Acked::default();
        for shard in &self.shards {
            all.stored += shard.publishing.acked.stored;
            all.duplicates += shard.publishing.acked.duplicates;
        }
        all
    }
}
