//! `--serve ADDR`: the live view next to a run's normal outputs. An HTTP server (axum on a
//! single-threaded tokio runtime, in a thread of its own) serves the page (`assets/serve/`,
//! embedded), a WebSocket of display rows, `/spectra` (NDJSON rows), `/metrics` (Prometheus) and
//! `/healthz`. The pipeline talks to it only through `hub::LiveHub`, which never waits on a client.
//!
//! Protocol and endpoints: docs/serve.md.

pub mod address;
pub mod display;
pub mod hub;
pub mod metrics;
pub mod spectra;
pub mod ws;

use crate::error::{FftdError, Result};
use axum::extract::{Query, State, WebSocketUpgrade};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hub::LiveHub;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Display rows per second per stream, at most.
pub const DISPLAY_FPS: u32 = 60;

/// How long open responses may take to end after a shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

const PAGE: &str = include_str!("../../assets/serve/index.html");

/// A running server; `shutdown` stops it (dropping it does too).
pub struct Server {
    pub addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Clone)]
struct App {
    hub: Arc<LiveHub>,
    shutdown: watch::Receiver<bool>,
}

impl Server {
    /// Binds `addr` now (so a taken port is an error before the run) and serves from a thread.
    pub fn start(addr: SocketAddr, hub: Arc<LiveHub>) -> Result<Server> {
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| FftdError::Runtime(format!("--serve {addr}: cannot listen: {e}")))?;
        let addr = listener.local_addr().unwrap_or(addr);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| FftdError::Runtime(format!("--serve: cannot start the server: {e}")))?;
        let (shutdown, stopping) = watch::channel(false);
        let app = App {
            hub,
            shutdown: stopping,
        };
        let thread = std::thread::Builder::new()
            .name("fftd-serve".into())
            .spawn(move || runtime.block_on(serve(listener, app)))
            .map_err(|e| FftdError::Runtime(format!("--serve: cannot start the server: {e}")))?;
        Ok(Server {
            addr,
            shutdown,
            thread: Some(thread),
        })
    }

    /// Closes every connection and waits for the server thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shutdown.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve(listener: std::net::TcpListener, app: App) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("--serve: {e}");
            return;
        }
    };
    let ticker = tokio::spawn(tick(app.hub.clone()));
    let mut stopping = app.shutdown.clone();
    let mut grace_over = app.shutdown.clone();
    let router = Router::new()
        .route("/", get(page))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics_text))
        .route("/api/streams", get(streams))
        .route("/spectra", get(spectra_rows))
        .route("/ws", get(websocket))
        .with_state(app);
    let shutdown = async move {
        let _ = stopping.wait_for(|&stop| stop).await;
    };
    // connections still open a moment after the shutdown are closed with the runtime
    let grace = async move {
        let _ = grace_over.wait_for(|&stop| stop).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    let server = axum::serve(listener, router).with_graceful_shutdown(shutdown);
    tokio::select! {
        served = server => if let Err(e) = served {
            tracing::error!("--serve: {e}");
        },
        _ = grace => {}
    }
    ticker.abort();
}

/// Turns the folded frames into display rows `DISPLAY_FPS` times a second.
async fn tick(hub: Arc<LiveHub>) {
    let mut interval = tokio::time::interval(Duration::from_secs(1) / DISPLAY_FPS);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        interval.tick().await;
        hub.tick();
    }
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
        .into_response()
}

async fn metrics_text(State(app): State<App>) -> Response {
    let text = metrics::render(&app.hub);
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
}

async fn streams(State(app): State<App>) -> Response {
    axum::Json(serde_json::json!({ "streams": app.hub.streams })).into_response()
}

async fn spectra_rows(State(app): State<App>, Query(filter): Query<spectra::Filter>) -> Response {
    let streams = app.hub.streams.len();
    if let Some(stream) = filter.stream.filter(|&s| s >= streams) {
        let why = format!(
            "no stream {stream}: this run has streams 0 to {}\n",
            streams - 1
        );
        return (axum::http::StatusCode::NOT_FOUND, why).into_response();
    }
    let body = spectra::body(app.hub.clone(), filter);
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

async fn websocket(
    State(app): State<App>,
    Query(want): Query<ws::Want>,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade.on_upgrade(move |socket| ws::run(socket, app.hub, want, app.shutdown))
}
