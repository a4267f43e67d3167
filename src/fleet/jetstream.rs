//! The JetStream objects a fleet uses, looked up by name with errors that name what is missing,
//! and created by `fftd fleet setup`:
//!
//! - the work stream (work-queue retention: a block is gone once a worker acks it) and its
//!   durable pull consumer, shared by every worker (`ack_wait`, `max_deliver`);
//! - the spectra stream that captures the workers' output subjects, with a duplicate window
//!   (rows carry `Nats-Msg-Id`; a redelivered block's rows are dropped there);
//! - a stream keeping the server's advisories for blocks the consumer gave up on (`undelivered`);
//! - with `--shards N`, each of these but the spectra stream once per shard of the work (`shards`).

use super::connect::one_line;
use super::shards::{shard_stream, shard_subject};
use super::undelivered::{advisory_stream, advisory_subject};
use crate::error::{FftdError, Result};
use async_nats::jetstream::consumer::{pull, AckPolicy, PullConsumer};
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::context::{ConsumerInfoError, ConsumerInfoErrorKind};
use async_nats::jetstream::stream::{Config, RetentionPolicy, StorageType, Stream};
use async_nats::jetstream::Context;
use async_nats::jetstream::ErrorCode;
use std::time::Duration;

/// Why a lookup failed: the object is not on the server (final: `fftd fleet setup` creates it), or
/// the server did not answer (a restart, a network cut: worth asking again). Either is one line.
#[derive(Debug)]
pub(crate) enum LookupError {
    Missing(String),
    Failed(String),
}

impl From<LookupError> for FftdError {
    fn from(e: LookupError) -> Self {
        match e {
            LookupError::Missing(m) | LookupError::Failed(m) => FftdError::Runtime(m),
        }
    }
}

/// How long a worker starting during an outage keeps asking for its stream and consumer.
pub(crate) const LOOKUP_FAILING_FOR: Duration = Duration::from_secs(30);

/// `lookup` asked again every 250 ms while it only failed (the server did not answer), for up to
/// `LOOKUP_FAILING_FOR`; what is missing is final at once.
pub(crate) async fn patiently<T, F, Fut>(mut lookup: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, LookupError>>,
{
    let started = tokio::time::Instant::now();
    loop {
        match lookup().await {
            Ok(found) => return Ok(found),
            Err(LookupError::Failed(why)) if started.elapsed() < LOOKUP_FAILING_FOR => {
                tracing::debug!("{why}; asking again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The work stream and its durable pull consumer; one line naming the stream or consumer missing.
pub(crate) async fn work_consumer(
    js: &Context,
    stream: &str,
    consumer: &str,
) -> std::result::Result<(Stream, PullConsumer), LookupError> {
    let work = js.get_stream(stream).await.map_err(|e| {
        let missing = matches!(e.kind(), GetStreamErrorKind::JetStream(j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND)
            || e.to_string().contains("stream not found");
        match missing {
            true => LookupError::Missing(format!(
                "no JetStream stream '{stream}' on the server (create it with fftd fleet setup)"
            )),
            false => LookupError::Failed(format!(
                "cannot look up JetStream stream '{stream}': {}",
                one_line(&e.to_string())
            )),
        }
    })?;
    work.consumer_info(consumer).await.map_err(|e| {
        match consumer_missing(&e) {
            true => LookupError::Missing(format!(
                "no consumer '{consumer}' on JetStream stream '{stream}' (create it with fftd fleet setup)"
            )),
            false => LookupError::Failed(format!(
                "cannot look up consumer '{consumer}' of stream '{stream}': {}",
                one_line(&e.to_string())
            )),
        }
    })?;
    let pull = work
        .get_consumer::<pull::Config>(consumer)
        .await
        .map_err(|e| {
            // it exists (asked just above): its info asked again got no answer, or its config is
            // a push consumer's
            let text = one_line(&e.to_string());
            match e.downcast_ref::<ConsumerInfoError>() {
                Some(_) => LookupError::Failed(format!(
                    "cannot look up consumer '{consumer}' of stream '{stream}': {text}"
                )),
                None => LookupError::Missing(format!(
                    "consumer '{consumer}' of stream '{stream}' is no pull consumer: {text}"
                )),
            }
        })?;
    Ok((work, pull))
}

/// Whether a consumer lookup failed because there is no such consumer.
fn consumer_missing(e: &async_nats::jetstream::context::ConsumerInfoError) -> bool {
    matches!(e.kind(), ConsumerInfoErrorKind::JetStream(j) if j.error_code() == ErrorCode::CONSUMER_NOT_FOUND)
        || e.to_string().contains("consumer not found")
}

/// The stream that captures `subject` (rows or blocks are published there with acks); one line
/// when none does, since a publish would then never be acknowledged.
pub(crate) async fn stream_capturing(
    js: &Context,
    subject: &str,
) -> std::result::Result<String, LookupError> {
    match js.stream_by_subject(subject).await {
        Ok(name) => Ok(name),
        Err(e) if e.to_string().contains("not found") => Err(LookupError::Missing(format!(
            "no JetStream stream captures subject '{subject}' (create one with fftd fleet setup)"
        ))),
        Err(e) => Err(LookupError::Failed(format!(
            "cannot find the JetStream stream of subject '{subject}': {}",
            one_line(&e.to_string())
        ))),
    }
}

/// What `fftd fleet setup` creates.
pub(crate) struct FleetLayout {
    pub work_stream: String,
    pub work_subjects: Vec<String>,
    pub consumer: String,
    pub ack_wait: Duration,
    pub max_deliver: i64,
    pub spectra_stream: String,
    pub spectra_subjects: Vec<String>,
    pub duplicate_window: Duration,
    pub memory: bool,
    pub replicas: usize,
    /// Streams the work is spread over (`shards`), 1 or more.
    pub shards: usize,
    /// Delete the consumer first when it exists: a new one delivers every block still on the
    /// work stream, those it had given up on included.
    pub recreate_consumer: bool,
}

/// Creates the work stream's shards (`shards`: each a stream, its consumer and the stream of
/// its given-up advisories) and the spectra stream, or leaves each as it is when it exists
/// already; returns one line per object saying which.
pub(crate) async fn set_up(js: &Context, layout: &FleetLayout) -> Result<Vec<String>> {
    let storage = match layout.memory {
        true => StorageType::Memory,
        false => StorageType::File,
    };
    let mut report = Vec::new();
    for k in 0..layout.shards.max(1) {
        report.extend(set_up_shard(js, layout, k, storage).await?);
    }
    let spectra = Config {
        name: layout.spectra_stream.clone(),
        subjects: layout.spectra_subjects.clone(),
        storage,
        num_replicas: layout.replicas,
        duplicate_window: layout.duplicate_window,
        ..Default::default()
    };
    report.push(ensure_stream(js, spectra).await?);
    Ok(report)
}

/// Shard `k` of the work stream (`shards`): the stream, the stream keeping the server's
/// advisories about blocks its consumer gives up on (for workers started later), the consumer.
async fn set_up_shard(
    js: &Context,
    layout: &FleetLayout,
    k: usize,
    storage: StorageType,
) -> Result<Vec<String>> {
    let name = shard_stream(&layout.work_stream, k);
    let work = Config {
        name: name.clone(),
        subjects: (layout.work_subjects.iter())
            .map(|s| shard_subject(k, s))
            .collect(),
        retention: RetentionPolicy::WorkQueue,
        storage,
        num_replicas: layout.replicas,
        duplicate_window: layout.duplicate_window,
        ..Default::default()
    };
    let given_up = Config {
        name: advisory_stream(&name),
        subjects: vec![advisory_subject(&name, "*")],
        storage,
        num_replicas: layout.replicas,
        max_age: Duration::from_secs(30 * 86_400),
        max_messages: 1_000_000,
        ..Default::default()
    };
    Ok(vec![
        ensure_stream(js, work).await?,
        ensure_stream(js, given_up).await?,
        set_up_consumer(js, layout, &name).await?,
    ])
}

/// The durable consumer of the work stream (shard) `work_stream`: created, created again
/// (`recreate_consumer`), or left as it is; the line that says which.
async fn set_up_consumer(js: &Context, layout: &FleetLayout, work_stream: &str) -> Result<String> {
    let stream = js
        .get_stream(work_stream)
        .await
        .map_err(|e| runtime("look up", work_stream, &e))?;
    let consumer = pull::Config {
        durable_name: Some(layout.consumer.clone()),
        ack_policy: AckPolicy::Explicit,
        ack_wait: layout.ack_wait,
        max_deliver: layout.max_deliver,
        max_ack_pending: 10_000,
        ..Default::default()
    };
    let exists = match stream.consumer_info(&layout.consumer).await {
        Ok(_) => true,
        Err(e) if consumer_missing(&e) => false,
        Err(e) => return Err(runtime("look up consumer", &layout.consumer, &e)),
    };
    let line = match (exists, layout.recreate_consumer) {
        (true, false) => format!(
            "consumer '{}' on '{work_stream}': exists, left as it is",
            layout.consumer
        ),
        (exists, _) => {
            if exists {
                stream
                    .delete_consumer(&layout.consumer)
                    .await
                    .map_err(|e| runtime("delete consumer", &layout.consumer, &e))?;
            }
            stream
                .create_consumer(consumer)
                .await
                .map_err(|e| runtime("create consumer", &layout.consumer, &e))?;
            format!(
                "consumer '{}' on '{work_stream}': {} (ack wait {} s, at most {} deliveries)",
                layout.consumer,
                if exists { "created again" } else { "created" },
                layout.ack_wait.as_secs_f64(),
                layout.max_deliver
            )
        }
    };
    Ok(line)
}

async fn ensure_stream(js: &Context, config: Config) -> Result<String> {
    let name = config.name.clone();
    if js.get_stream(&name).await.is_ok() {
        return Ok(format!("stream '{name}': exists, left as it is"));
    }
    let subjects = config.subjects.join(", ");
    js.create_stream(config)
        .await
        .map_err(|e| runtime("create stream", &name, &e))?;
    Ok(format!("stream '{name}' ({subjects}): created"))
}

fn runtime(what: &str, name: &str, e: &dyn std::fmt::Display) -> FftdError {
    FftdError::Runtime(format!(
        "cannot {what} '{name}': {}",
        one_line(&e.to_string())
    ))
}
