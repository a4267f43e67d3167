//! Rows batched into messages (issue 28): a fleet worker's rows and a local run's
//! `--output nats://` rows go out many to a JetStream message, so the server's byte rate, not
//! its message rate, bounds a fleet. `--rows-per-message 1` keeps one row per message (the layout
//! of `rows::RowHeaders`) for consumers that want it.
//!
//! A batch message (docs/fleet.md, "Payload layout") holds consecutive frames of one stream. Its
//! headers are a row's (`source`, `run`, `stream`, `frame` = the first frame, `time_s` = the first
//! row's, `scale`, `bins`, `n`, `hop`) plus `rows` (how many) and `layout: fftd-rows-1`; its
//! payload is, for each row in frame order, a 20-byte prefix — frame (u64), time_s (f64) and the
//! row's length in bytes (u32), all little-endian — then the row in `--format`. Its `Nats-Msg-Id`
//! is `<subject>:<source>/<run>/<stream>/r<first>+<rows>/<analysis>`.
//!
//! How rows are split into messages depends only on the rows' bytes, the limit of rows and the
//! payload budget (the server's max_payload): a block redelivered to another worker is split the
//! same way, so the messages a first worker had stored before it died are dropped as duplicates
//! and no row is stored twice.

use super::ids::Origin;
use super::publish_acked::Outgoing;
use super::rows::RowHeaders;
use std::ops::Range;

/// The `layout` header of a batch message.
pub(crate) const LAYOUT: &str = "fftd-rows-1";
/// Bytes before each row in a batch payload: frame u64, time_s f64, length u32.
pub(crate) const ROW_PREFIX: usize = 20;
/// Room left for headers below the server's max_payload.
pub(crate) const HEADER_ROOM: usize = 4096;
/// Largest batch payload, whatever the server allows.
pub(crate) const MAX_BATCH_BYTES: usize = 8 << 20;

/// How many rows go in one message: `--rows-per-message N|max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RowsPerMessage {
    /// As many as fit the server's max_payload (a worker: at most a block's).
    #[default]
    Max,
    /// At most N (1: one-row messages, the one-row layout).
    Up(usize),
}

impl RowsPerMessage {
    /// The largest count `N` accepts.
    pub(crate) const LIMIT: usize = 1 << 20;

    fn limit(self) -> usize {
        match self {
            RowsPerMessage::Max => usize::MAX,
            RowsPerMessage::Up(n) => n,
        }
    }

    pub fn name(self) -> String {
        match self {
            RowsPerMessage::Max => "max".into(),
            RowsPerMessage::Up(n) => n.to_string(),
        }
    }
}

/// `--rows-per-message`: a whole number from 1 to 2^20, or `max`.
pub(crate) fn parse_rows_per_message(text: &str) -> Result<RowsPerMessage, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("max") {
        return Ok(RowsPerMessage::Max);
    }
    match t.parse::<usize>() {
        Ok(n) if (1..=RowsPerMessage::LIMIT).contains(&n) => Ok(RowsPerMessage::Up(n)),
        _ => Err(format!(
            "'{text}': expected a number of rows from 1 to {} or max",
            RowsPerMessage::LIMIT
        )),
    }
}

impl std::str::FromStr for RowsPerMessage {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_rows_per_message(s)
    }
}

/// One encoded row: its frame, time and where its bytes are.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub frame: u64,
    pub time_s: f64,
    pub bytes: Range<usize>,
}

/// What all the rows of one stream's messages share.
pub(crate) struct RowsOf<'a> {
    pub origin: Origin<'a>,
    pub scale: &'a str,
    pub bins: usize,
    pub n: usize,
    pub hop: usize,
    /// `rows::analysis_of` the run, the last part of every id.
    pub analysis: &'a str,
}

/// How a stream's rows become messages: rows per message and the payload budget (bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packing {
    pub per_message: RowsPerMessage,
    pub budget: usize,
}

impl Packing {
    /// The budget under a server's `max_payload`.
    pub(crate) fn for_server(per_message: RowsPerMessage, max_payload: usize) -> Packing {
        Packing {
            per_message,
            budget: max_payload
                .saturating_sub(HEADER_ROOM)
                .clamp(HEADER_ROOM, MAX_BATCH_BYTES),
        }
    }

    /// The messages of `rows` (one stream's, in frame order) whose bytes are in `bytes`.
    pub(crate) fn messages(
        &self,
        of: &RowsOf<'_>,
        rows: &[Row],
        bytes: &[u8],
        out: &mut Vec<Outgoing>,
    ) {
        if self.per_message == RowsPerMessage::Up(1) {
            out.extend(rows.iter().map(|row| Outgoing {
                headers: of.headers(row, None),
                payload: bytes::Bytes::copy_from_slice(&bytes[row.bytes.clone()]),
            }));
            return;
        }
        for group in self.split(rows) {
            let rows = &rows[group];
            let size = rows.iter().map(|r| ROW_PREFIX + r.bytes.len()).sum();
            let mut payload = Vec::with_capacity(size);
            for row in rows {
                payload.extend_from_slice(&row.frame.to_le_bytes());
                payload.extend_from_slice(&row.time_s.to_le_bytes());
                payload.extend_from_slice(&(row.bytes.len() as u32).to_le_bytes());
                payload.extend_from_slice(&bytes[row.bytes.clone()]);
            }
            out.push(Outgoing {
                headers: of.headers(&rows[0], Some(rows.len())),
                payload: payload.into(),
            });
        }
    }

    /// Consecutive frames, at most the limit of rows and (but for a single row) the budget of
    /// bytes each. Depends on nothing but its arguments.
    fn split(&self, rows: &[Row]) -> Vec<Range<usize>> {
        let mut groups = Vec::new();
        let mut start = 0;
        let mut size = 0;
        for (i, row) in rows.iter().enumerate() {
            let len = ROW_PREFIX + row.bytes.len();
            let next_frame = i > start && row.frame != rows[i - 1].frame + 1;
            let full = i - start >= self.per_message.limit() || size + len > self.budget;
            if i > start && (next_frame || full) {
                groups.push(start..i);
                start = i;
                size = 0;
            }
            size += len;
        }
        if start < rows.len() {
            groups.push(start..rows.len());
        }
        groups
    }
}

impl RowsOf<'_> {
    /// The headers of a message whose first row is `row`: a one-row message's, or with `batch`
    /// (its rows) a batch message's.
    fn headers(&self, row: &Row, batch: Option<usize>) -> async_nats::HeaderMap {
        let o = &self.origin;
        let mut h = RowHeaders {
            origin: Origin { ..*o },
            frame: row.frame,
            time_s: row.time_s,
            scale: self.scale,
            bins: self.bins,
            n: self.n,
            hop: self.hop,
        }
        .to_headers(self.analysis);
        if let Some(count) = batch {
            h.insert("rows", count.to_string().as_str());
            h.insert("layout", LAYOUT);
            let id = o.batch_id(row.frame, count, self.analysis);
            h.insert("Nats-Msg-Id", id.as_str());
        }
        h
    }
}

/// One row of a batch payload: frame, time_s, the row's bytes.
#[cfg(test)]
pub(crate) type DecodedRow<'a> = (u64, f64, &'a [u8]);

/// The rows of a batch payload; the error says where it is broken (the tests' reader).
#[cfg(test)]
pub(crate) fn decode(payload: &[u8]) -> Result<Vec<DecodedRow<'_>>, String> {
    let mut rows = Vec::new();
    let mut at = 0;
    while at < payload.len() {
        let prefix = payload
            .get(at..at + ROW_PREFIX)
            .ok_or_else(|| format!("a row prefix cut short at byte {at}"))?;
        let word = |from: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&prefix[from..from + 8]);
            b
        };
        let frame = u64::from_le_bytes(word(0));
        let time_s = f64::from_le_bytes(word(8));
        let len = u32::from_le_bytes([prefix[16], prefix[17], prefix[18], prefix[19]]) as usize;
        let body = at + ROW_PREFIX;
        let row = payload
            .get(body..body + len)
            .ok_or_else(|| format!("row of frame {frame} cut short at byte {body}"))?;
        rows.push((frame, time_s, row));
        at = body + len;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(frames: &[u64], len: usize) -> (Vec<Row>, Vec<u8>) {
        let mut bytes = Vec::new();
        let rows = frames
            .iter()
            .map(|&f| {
                let from = bytes.len();
                bytes.extend((0..len).map(|k| (f as usize + k) as u8));
                Row {
                    frame: f,
                    time_s: f as f64 * 0.5,
                    bytes: from..bytes.len(),
                }
            })
            .collect();
        (rows, bytes)
    }

    fn of<'a>(analysis: &'a str) -> RowsOf<'a> {
        RowsOf {
            origin: Origin {
                subject: "spectra.x",
                source: "rec",
                run: "r",
                stream: 2,
            },
            scale: "db",
            bins: 3,
            n: 4,
            hop: 2,
            analysis,
        }
    }

    #[test]
    fn batches_read_back_and_split_on_gaps_limits_and_budget() {
        let (r, bytes) = rows(&[0, 1, 2, 3, 7, 8], 12);
        let packing = Packing {
            per_message: RowsPerMessage::Up(3),
            budget: 1000,
        };
        let mut out = Vec::new();
        packing.messages(&of("a"), &r, &bytes, &mut out);
        // 0..3, 3 (the limit), 7..9 (a gap)
        assert_eq!(out.len(), 3);
        let id = out[1].headers.get("Nats-Msg-Id").expect("id").as_str();
        assert_eq!(id, "spectra.x:rec/r/2/r3+1/a");
        let back = decode(&out[2].payload).expect("decodes");
        assert_eq!(back.len(), 2);
        assert_eq!((back[1].0, back[1].1), (8, 4.0));
        assert_eq!(back[1].2, &bytes[r[5].bytes.clone()]);
        assert_eq!(out[2].headers.get("rows").expect("rows").as_str(), "2");
        assert_eq!(out[2].headers.get("frame").expect("frame").as_str(), "7");
        // the budget: 2 rows of 32 bytes fit in 70
        let tight = Packing {
            per_message: RowsPerMessage::Max,
            budget: 70,
        };
        let mut out = Vec::new();
        tight.messages(&of("a"), &r, &bytes, &mut out);
        assert_eq!(out.len(), 3); // 0..2, 2..4, 7..9
                                  // one-row messages: the row itself, a row's id
        let one = Packing {
            per_message: RowsPerMessage::Up(1),
            budget: 70,
        };
        let mut out = Vec::new();
        one.messages(&of("a"), &r, &bytes, &mut out);
        assert_eq!(out.len(), 6);
        assert_eq!(&out[4].payload[..], &bytes[r[4].bytes.clone()]);
        assert!(out[4].headers.get("rows").is_none());
        assert!(decode(&[1, 2, 3]).is_err());
    }

    #[test]
    fn rows_per_message_parses() {
        assert_eq!(parse_rows_per_message("max"), Ok(RowsPerMessage::Max));
        assert_eq!(parse_rows_per_message(" 16 "), Ok(RowsPerMessage::Up(16)));
        for bad in ["0", "-1", "x", "2000000"] {
            assert!(parse_rows_per_message(bad).is_err(), "{bad}");
        }
    }
}
