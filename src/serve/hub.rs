//! The meeting point of the pipeline and the server. The encode threads fold every row into its
//! stream's display fold and, while someone reads `/spectra`, encode rows as NDJSON; the sink
//! publishes those rows in order. The server's ticker turns folds into display rows at the display
//! rate, keeps a short history per stream and broadcasts them to WebSocket sessions.
//!
//! Nothing here ever waits on a client: rows go to `/spectra` readers through bounded queues
//! (`try_send`; a full queue counts the rows as skipped for that reader) and display rows through
//! broadcast channels (a reader that lags loses the oldest rows).

use super::display::{DisplayRow, Fold, Layout, Level};
use crate::fft::Scale;
use crate::stats::Counters;
use crate::types::InputKind;
use crate::types::StreamMeta;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, watch};

/// Display rows kept per stream for a page that connects later, at most.
const HISTORY_ROWS: usize = 512;
/// Memory the history of all streams may take (bytes of dB values).
const HISTORY_BYTES: usize = 256 << 20;
/// Display rows a WebSocket session may lag behind before it loses the oldest.
const BROADCAST_ROWS: usize = 64;
/// Batches of rows queued for one `/spectra` reader before further rows are skipped for it.
const ROWS_QUEUE: usize = 1024;
/// Bytes of rows queued for one `/spectra` reader before further rows are skipped for it.
const ROWS_QUEUE_BYTES: usize = 32 << 20;
/// A stream no session watches gets a display row (for the history of pages to come) this often.
const UNWATCHED_ROW_INTERVAL: Duration = Duration::from_millis(250);

/// What the page and `/api/streams` say about a stream.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct StreamInfo {
    pub id: usize,
    pub name: String,
    pub rate: f64,
    pub kind: &'static str,
    pub fftshift: bool,
    pub scale: &'static str,
    /// The unit of the levels drawn (`dB`; calibrated, e.g. `dB SPL (A-weighted)`, with
    /// measurements: docs/measure.md).
    pub unit: String,
    /// `--cross A,B` on channel A's stream (whose rows are the pair's: drawn is |H1| in dB, the
    /// page plots H1's magnitude and phase and the coherence from `/spectra`); None otherwise.
    pub cross: Option<String>,
}

/// Rows of one batch encoded as NDJSON lines, for `/spectra`.
pub(crate) struct LiveRows {
    pub rows: Vec<LiveRow>,
    pub bytes: Vec<u8>,
}

pub(crate) struct LiveRow {
    pub stream: usize,
    pub frame: u64,
    pub bytes: Range<usize>,
}

/// A batch of rows for one `/spectra` reader, after the rows it missed just before them (its
/// queue was full), which take their place in the stream as `{"skipped":M}`.
pub(crate) type RowsAfterSkip = (u64, Arc<LiveRows>);

/// One `/spectra` reader.
struct RowReader {
    tx: mpsc::Sender<RowsAfterSkip>,
    /// The first batch it gets: every batch from here on was encoded after it arrived (so has
    /// rows), and no row of its streams is missing between two it gets.
    first_batch: u64,
    /// Rows missed since the last batch queued (handed on with the next one queued).
    skipped: Arc<AtomicU64>,
    queued_bytes: Arc<AtomicUsize>,
}

/// What a `/spectra` reader receives.
pub(crate) struct RowSubscription {
    pub rx: mpsc::Receiver<RowsAfterSkip>,
    /// Rows it missed after the last batch queued for it (read once the input has ended).
    pub skipped: Arc<AtomicU64>,
    /// Bytes of rows in its queue (the reader takes off what it receives).
    pub queued_bytes: Arc<AtomicUsize>,
}

/// What a WebSocket session receives of one stream.
pub(crate) struct DisplaySubscription {
    pub rows: broadcast::Receiver<Arc<DisplayRow>>,
    /// The recent rows, oldest first (sent before the live ones).
    pub history: Vec<Arc<DisplayRow>>,
}

/// One stream's display state.
#[derive(Default)]
struct StreamDisplay {
    fold: Mutex<Option<Fold>>,
    /// A sweep's whole band, each part as last swept (`Fold::hold`).
    band: Mutex<Option<Fold>>,
    layout: Mutex<Option<Arc<Layout>>>,
    history: Mutex<History>,
    rows: OnceLock<broadcast::Sender<Arc<DisplayRow>>>,
}

/// A stream's recent display rows, and how many it has made.
#[derive(Default)]
struct History {
    rows: VecDeque<Arc<DisplayRow>>,
    made: u64,
    last_made: Option<Instant>,
}

impl StreamDisplay {
    fn sender(&self) -> &broadcast::Sender<Arc<DisplayRow>> {
        self.rows
            .get_or_init(|| broadcast::channel(BROADCAST_ROWS).0)
    }
}

pub(crate) struct LiveHub {
    pub streams: Vec<StreamInfo>,
    metas: Vec<StreamMeta>,
    pub level: Level,
    display: Vec<StreamDisplay>,
    /// Streams folded since the last tick.
    dirty: Mutex<Vec<usize>>,
    /// Held while display rows are made (`make_rows`): the ticker's and the final flush's one
    /// after the other.
    making: Mutex<()>,
    readers: Mutex<Vec<RowReader>>,
    /// Number of `/spectra` readers (the encode threads encode rows while it is not 0).
    rows_wanted: AtomicUsize,
    /// The next batch number the encode stage will see (set when the pipeline starts).
    numbering: OnceLock<Arc<AtomicU64>>,
    finished: watch::Sender<bool>,
    pub counters: Arc<Counters>,
    pub serve: ServeCounters,
    /// issue 27: `--alert` events for `/events` and `/metrics` (set when the run has rules).
    pub alerts: OnceLock<Arc<crate::alerts::feed::AlertFeed>>,
}

/// The server's own counters, for `/metrics`.
#[derive(Default)]
pub(crate) struct ServeCounters {
    pub ws_sessions: AtomicUsize,
    pub ws_rows_sent: AtomicU64,
    pub ws_rows_skipped: AtomicU64,
    pub ws_dropped_clients: AtomicU64,
    pub spectra_rows_sent: AtomicU64,
    pub spectra_rows_skipped: AtomicU64,
}

impl LiveHub {
    pub(crate) fn new(streams: &[StreamMeta], scale: Scale, counters: Arc<Counters>) -> Self {
        let infos = streams
            .iter()
            .map(|s| StreamInfo {
                id: s.id,
                name: match s.channel {
                    Some(c) => format!("{} (channel {c})", s.input),
                    None => s.input.clone(),
                },
                rate: s.rate,
                kind: match s.kind {
                    InputKind::Real => "real",
                    InputKind::Complex => "complex",
                },
                fftshift: s.fftshift,
                scale: scale.name(),
                unit: "dB".into(),
                cross: None,
            })
            .collect();
        LiveHub {
            streams: infos,
            metas: streams.to_vec(),
            level: Level::of(scale),
            display: streams.iter().map(|_| StreamDisplay::default()).collect(),
            dirty: Mutex::new(Vec::new()),
            making: Mutex::new(()),
            readers: Mutex::new(Vec::new()),
            rows_wanted: AtomicUsize::new(0),
            numbering: OnceLock::new(),
            finished: watch::channel(false).0,
            counters,
            serve: ServeCounters::default(),
            alerts: OnceLock::new(),
        }
    }

    /// Names the run's measurements on its streams (`StreamInfo::unit`, `cross`); with `--cross`
    /// the rows drawn are the pairs' |H1| in dB (`pipeline::encode` folds those values).
    pub(crate) fn label(&mut self, measure: &crate::products::measure::MeasureOptions) {
        if let Some(cross) = measure.cross {
            self.level = Level::Decibel;
            for (info, meta) in self.streams.iter_mut().zip(&self.metas) {
                info.scale = Scale::Db.name();
                if meta.channel == Some(cross.a) {
                    info.cross = Some(cross.to_string());
                }
            }
        } else if measure.calibrates() {
            let unit = measure.unit();
            self.streams.iter_mut().for_each(|i| i.unit = unit.clone());
        }
    }

    /// The stream a page shows first: the first with rows drawn (with `--cross`, the first
    /// pair's), else 0.
    pub(crate) fn first_shown(&self) -> usize {
        let cross = self.streams.iter().find(|s| s.cross.is_some());
        cross.map_or(0, |s| s.id)
    }

    /// The counter the stage before the encoders numbers batches with.
    pub(crate) fn set_numbering(&self, numbering: Arc<AtomicU64>) {
        let _ = self.numbering.set(numbering);
    }

    // ---- the pipeline's side ----

    /// Whether the encode threads should encode rows for `/spectra`.
    pub(crate) fn rows_wanted(&self) -> bool {
        self.rows_wanted.load(Ordering::SeqCst) > 0
    }

    /// Folds an encode thread's folds of one batch into the streams' folds.
    pub(crate) fn merge_folds(&self, folds: &mut Vec<(usize, Fold)>) {
        for (stream, fold) in folds.drain(..) {
            let Some(display) = self.display.get(stream) else {
                continue;
            };
            let Ok(mut slot) = display.fold.lock() else {
                continue;
            };
            match slot.as_mut() {
                Some(current) if current.n == fold.n && current.columns() == fold.columns() => {
                    current.merge(&fold)
                }
                Some(other_shape) => {
                    // rows of another width (a new frame size): show what was folded first
                    self.show(stream, other_shape);
                    *slot = Some(fold);
                }
                None => {
                    *slot = Some(fold);
                    if let Ok(mut dirty) = self.dirty.lock() {
                        dirty.push(stream);
                    }
                }
            }
        }
    }

    /// Hands batch `batch`'s rows to the `/spectra` readers (the sink calls it in batch order).
    pub(crate) fn publish_rows(&self, batch: u64, rows: &Arc<LiveRows>) {
        let Ok(mut readers) = self.readers.lock() else {
            return;
        };
        readers.retain(|reader| {
            if batch < reader.first_batch {
                return true;
            }
            let bytes = rows.bytes.len();
            let room = reader.queued_bytes.load(Ordering::Relaxed) + bytes <= ROWS_QUEUE_BYTES;
            // (only this publisher takes from it while the reader's queue is open)
            let skipped_before = reader.skipped.swap(0, Ordering::Relaxed);
            let sent = match room {
                true => reader.tx.try_send((skipped_before, rows.clone())),
                false => Err(mpsc::error::TrySendError::Full((
                    skipped_before,
                    rows.clone(),
                ))),
            };
            match sent {
                Ok(()) => {
                    reader.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
                    true
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    let n = rows.rows.len() as u64;
                    reader
                        .skipped
                        .fetch_add(skipped_before + n, Ordering::Relaxed);
                    Counters::add(&self.serve.spectra_rows_skipped, n);
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.rows_wanted.fetch_sub(1, Ordering::SeqCst);
                    false
                }
            }
        });
    }

    /// The input has ended: `/spectra` responses end, pages are told.
    pub(crate) fn finish(&self) {
        if let Ok(mut readers) = self.readers.lock() {
            self.rows_wanted.fetch_sub(readers.len(), Ordering::SeqCst);
            readers.clear();
        }
        self.finished.send_replace(true);
    }

    // ---- the server's side ----

    pub(crate) fn finished(&self) -> watch::Receiver<bool> {
        self.finished.subscribe()
    }

    /// A new `/spectra` reader; None once the input has ended.
    pub(crate) fn subscribe_rows(&self) -> Option<RowSubscription> {
        let mut readers = self.readers.lock().ok()?;
        if *self.finished.borrow() {
            return None;
        }
        // rows first, then the batch number: a batch numbered from here on is encoded after
        // the encoders can see that rows are wanted
        self.rows_wanted.fetch_add(1, Ordering::SeqCst);
        let first_batch = self.numbering.get().map_or(0, |n| n.load(Ordering::SeqCst));
        let (tx, rx) = mpsc::channel(ROWS_QUEUE);
        let skipped = Arc::new(AtomicU64::new(0));
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        readers.push(RowReader {
            tx,
            first_batch,
            skipped: skipped.clone(),
            queued_bytes: queued_bytes.clone(),
        });
        Some(RowSubscription {
            rx,
            skipped,
            queued_bytes,
        })
    }

    /// Display rows of `stream` from now on, and the recent ones.
    pub(crate) fn subscribe_display(&self, stream: usize) -> Option<DisplaySubscription> {
        let display = self.display.get(stream)?;
        let history = display.history.lock().ok()?;
        // under the history lock: the ticker pushes to history and sends under it too
        Some(DisplaySubscription {
            rows: display.sender().subscribe(),
            history: history.rows.iter().cloned().collect(),
        })
    }

    /// Turns the folds since the last tick into display rows (the server's ticker calls this at
    /// the display rate). A stream no session watches keeps folding, and gets a row for the
    /// history of pages to come every `UNWATCHED_ROW_INTERVAL` only.
    pub(crate) fn tick(&self) {
        self.make_rows(false);
    }

    /// Makes the display rows of every fold now (the last frames, before the end).
    pub(crate) fn flush(&self) {
        self.make_rows(true);
    }

    fn make_rows(&self, all: bool) {
        // (one at a time: a tick holds the streams it takes from `dirty` until it puts back the
        // ones not due; a flush meanwhile found none, and the end's last rows were never made:
        // a page opened after the end then lacked its last frames, seen under load in CI)
        let Ok(_making) = self.making.lock() else {
            return;
        };
        let dirty = match self.dirty.lock() {
            Ok(mut dirty) => std::mem::take(&mut *dirty),
            Err(_) => return,
        };
        let mut later = Vec::new();
        for stream in dirty {
            if !all && !self.due(stream) {
                later.push(stream);
                continue;
            }
            let fold = match self.display[stream].fold.lock() {
                Ok(mut slot) => slot.take(),
                Err(_) => None,
            };
            if let Some(fold) = fold {
                self.show(stream, &fold);
            }
        }
        if let Ok(mut dirty) = self.dirty.lock() {
            dirty.extend(later);
        }
    }

    /// Whether `stream` gets its display row this tick.
    fn due(&self, stream: usize) -> bool {
        let display = &self.display[stream];
        let watched = display.rows.get().is_some_and(|tx| tx.receiver_count() > 0);
        watched
            || display.history.lock().map_or(true, |h| {
                h.last_made
                    .is_none_or(|t| t.elapsed() >= UNWATCHED_ROW_INTERVAL)
            })
    }

    /// Makes `fold`'s display row, numbers it, keeps it and sends it to the sessions.
    fn show(&self, stream: usize, fold: &Fold) {
        // a sweep: its whole band, each part as last swept, shown while held
        if self.metas[stream]
            .tuning
            .as_ref()
            .is_some_and(|t| t.band.is_some())
        {
            let Ok(mut band) = self.display[stream].band.lock() else {
                return;
            };
            let held = band.get_or_insert_with(|| fold.clone());
            held.hold(fold);
            return self.show_row(stream, held);
        }
        self.show_row(stream, fold)
    }

    /// Makes the display row of `fold` (a stream's, or a band's hold), as `show` says.
    fn show_row(&self, stream: usize, fold: &Fold) {
        let display = &self.display[stream];
        let layout = self.layout(stream, fold.n);
        let Ok(mut history) = display.history.lock() else {
            return;
        };
        let number = history.made;
        let row = Arc::new(DisplayRow::new(stream, number, fold, self.level, layout));
        history.made += 1;
        history.last_made = Some(Instant::now());
        let keep = self.history_rows_of(row.max_db.len());
        while history.rows.len() >= keep.max(1) {
            history.rows.pop_front();
        }
        if keep > 0 {
            history.rows.push_back(row.clone());
        }
        let _ = display.sender().send(row); // no session listening is fine
    }

    /// The display layout of `stream` for frames of `n`.
    fn layout(&self, stream: usize, n: usize) -> Arc<Layout> {
        let mut slot = match self.display[stream].layout.lock() {
            Ok(slot) => slot,
            Err(e) => e.into_inner(),
        };
        match slot.as_ref() {
            Some(layout) if layout.n == n => layout.clone(),
            _ => {
                let meta = &self.metas[stream];
                let band = meta.tuning.as_ref().and_then(|t| t.band);
                let hz = band.map_or_else(|| meta.column_frequencies(n), |b| b.frequencies());
                let layout = Arc::new(Layout::new(n, hz));
                *slot = Some(layout.clone());
                layout
            }
        }
    }

    /// History rows per stream for rows of `columns`, within the memory budget.
    fn history_rows_of(&self, columns: usize) -> usize {
        let per_row = 8 * columns.max(1);
        let per_stream = HISTORY_BYTES / self.display.len().max(1);
        (per_stream / per_row).min(HISTORY_ROWS)
    }

    pub(crate) fn spectra_readers(&self) -> usize {
        self.rows_wanted.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(streams: usize) -> LiveHub {
        let metas: Vec<StreamMeta> = (0..streams)
            .map(|id| StreamMeta {
                id,
                input: format!("s{id}"),
                channel: None,
                rate: 8.0,
                kind: InputKind::Real,
                fftshift: false,
                columns: None,
                tuning: None,
            })
            .collect();
        LiveHub::new(&metas, Scale::Power, Arc::default())
    }

    #[test]
    fn measurements_name_the_unit_and_a_pair_is_drawn_in_db_from_its_stream() {
        use crate::products::measure::{cross::CrossSpec, MeasureOptions};
        let mut calibrated = hub(2);
        calibrated.label(&MeasureOptions {
            calibration_db: Some(94.0),
            levels: true,
            ..MeasureOptions::default()
        });
        assert!(calibrated.streams.iter().all(|s| s.unit == "dB SPL"));
        assert_eq!(
            (calibrated.level, calibrated.first_shown()),
            (Level::Power, 0)
        );
        // three channels, --cross 2,1: channel 2's stream carries the pair's rows
        let mut pair = hub(3);
        for (meta, info) in pair.metas.iter_mut().zip(&mut pair.streams) {
            meta.channel = Some(info.id);
        }
        pair.label(&MeasureOptions {
            cross: Some(CrossSpec { a: 2, b: 1 }),
            ..MeasureOptions::default()
        });
        let crosses: Vec<Option<String>> = pair.streams.iter().map(|s| s.cross.clone()).collect();
        assert_eq!(crosses, [None, None, Some("2,1".to_string())]);
        assert_eq!((pair.level, pair.first_shown()), (Level::Decibel, 2));
        assert!(pair
            .streams
            .iter()
            .all(|s| s.unit == "dB" && s.scale == "db"));
    }

    #[test]
    fn folds_of_one_tick_make_one_display_row_per_stream() {
        let hub = hub(2);
        let sub = hub.subscribe_display(1).unwrap();
        assert!(sub.history.is_empty());
        let mut rx = sub.rows;
        for frame in 0..3u64 {
            let mut fold = Fold::new(8, 5);
            fold.add::<f32>(
                Level::Power,
                frame,
                frame as f64,
                &[1.0, 10.0, 1.0, 1.0, 1.0],
            );
            hub.merge_folds(&mut vec![(1, fold)]);
        }
        hub.tick();
        let row = rx.try_recv().unwrap();
        assert_eq!((row.stream, row.frames, row.last_frame), (1, 3, 2));
        assert_eq!(row.layout.columns_hz, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert!(rx.try_recv().is_err());
        hub.tick(); // nothing new
        assert!(rx.try_recv().is_err());
        assert_eq!(hub.subscribe_display(1).unwrap().history.len(), 1);
    }

    #[test]
    fn a_sweep_is_drawn_as_its_whole_band_each_part_as_last_swept() {
        use crate::types::tuning::{BandGrid, Tuning};
        let mut hub = hub(1);
        let band = BandGrid {
            low: 100.0,
            step: 1.0,
            bins: 6,
            hops: 2,
            per_hop: 3,
        };
        let tuning = Tuning {
            captures: Vec::new(),
            period: None,
            band: Some(band),
        };
        hub.metas[0].tuning = Some(Arc::new(tuning));
        let mut rx = hub.subscribe_display(0).unwrap().rows;
        // hops of 3 bins at the band's bins 0 and 3, then bin 0 again with a new level
        let mut sweep = |first: usize, level: f32, frame: u64| {
            let mut fold = Fold::new_band(8, band.bins);
            fold.add_at::<f32>(Level::Power, (frame, 0.0), &[level; 3], first);
            hub.merge_folds(&mut vec![(0, fold)]);
            hub.flush();
            rx.try_recv().unwrap()
        };
        let first = sweep(0, 10.0, 0);
        assert_eq!(first.layout.columns_hz, band.frequencies());
        assert_eq!(&first.mean_db[..3], &[10.0; 3]);
        assert!(
            first.mean_db[3..].iter().all(|v| *v == f32::NEG_INFINITY),
            "not swept yet"
        );
        let second = sweep(3, 100.0, 1);
        assert_eq!(second.mean_db, [10.0, 10.0, 10.0, 20.0, 20.0, 20.0]);
        let third = sweep(0, 1000.0, 2);
        assert_eq!(third.max_db, [30.0, 30.0, 30.0, 20.0, 20.0, 20.0]);
    }

    #[test]
    fn a_stream_nobody_watches_keeps_folding_between_its_rows() {
        let hub = hub(1);
        let fold_one = |frame: u64| {
            let mut fold = Fold::new(8, 5);
            fold.add::<f32>(Level::Power, frame, frame as f64, &[1.0; 5]);
            hub.merge_folds(&mut vec![(0, fold)]);
        };
        fold_one(0);
        hub.tick(); // the first row is made at once
        fold_one(1);
        fold_one(2);
        hub.tick(); // too soon after the first: frames 1 and 2 keep folding
        fold_one(3);
        let history = |hub: &LiveHub| hub.subscribe_display(0).unwrap().history;
        assert_eq!(history(&hub).len(), 1);
        hub.flush();
        let rows = history(&hub);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[1].number, rows[1].frames, rows[1].last_frame),
            (1, 3, 3)
        );
    }

    #[test]
    fn a_full_reader_is_skipped_and_the_others_still_get_rows() {
        let hub = hub(1);
        hub.set_numbering(Arc::new(AtomicU64::new(0)));
        let mut slow = hub.subscribe_rows().unwrap();
        let mut fast = hub.subscribe_rows().unwrap();
        assert!(hub.rows_wanted());
        let rows = Arc::new(LiveRows {
            rows: vec![LiveRow {
                stream: 0,
                frame: 0,
                bytes: 0..2,
            }],
            bytes: b"{}".to_vec(),
        });
        for batch in 0..(ROWS_QUEUE as u64 + 10) {
            hub.publish_rows(batch, &rows);
            assert!(fast.rx.try_recv().is_ok());
        }
        assert_eq!(slow.skipped.load(Ordering::Relaxed), 10);
        // the rows it missed come with the next batch queued for it, not with the ones queued
        // before them
        for _ in 0..ROWS_QUEUE {
            assert_eq!(slow.rx.try_recv().map(|(skipped, _)| skipped).ok(), Some(0));
        }
        hub.publish_rows(ROWS_QUEUE as u64 + 10, &rows);
        assert_eq!(
            slow.rx.try_recv().map(|(skipped, _)| skipped).ok(),
            Some(10)
        );
        assert_eq!(slow.skipped.load(Ordering::Relaxed), 0);
        hub.finish();
        assert!(!hub.rows_wanted());
        assert!(hub.subscribe_rows().is_none());
    }
}
