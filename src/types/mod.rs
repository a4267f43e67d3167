//! Shared types every stage speaks: the sample types and input kind, a stream's description, the
//! run's precision, where a recording was tuned, how a run is asked to end, and how numbers are
//! shown (and user text quoted). A leaf: it imports nothing of fftd, so any module may import it.

pub(crate) mod deferred_file;
pub(crate) mod duration;
mod fingerprint;
mod flag_value;
pub(crate) mod nats_url;
pub(crate) mod number;
pub(crate) mod pem;
mod precision;
mod sample;
mod signals;
pub(crate) mod small_file;
mod stream;
mod text;
pub(crate) mod tuning;
pub(crate) mod utc_time;

pub(crate) use fingerprint::fingerprint;
pub(crate) use flag_value::{scaled_hz, whole_in};
pub use precision::Precision;
pub(crate) use precision::WithSample;
pub use sample::{InputKind, Sample};
pub(crate) use signals::RemovedAtExit;
pub use signals::{exit_interrupted, Signals, INTERRUPTED_EXIT};
pub(crate) use stream::StreamMeta;
pub use text::{escaped, shown, shown_path};
pub(crate) use tuning::Tuning;
