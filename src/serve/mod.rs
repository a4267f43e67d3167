//! `--serve ADDR`: the live view next to a run's normal outputs. An HTTP server (axum routes,
//! hyper connections driven by `conn`, on a single-threaded tokio runtime in a thread of its own)
//! serves the page (`assets/serve/`, embedded), a WebSocket of display rows, `/spectra` (NDJSON
//! rows), `/metrics` (Prometheus) and `/healthz`. Every request passes `guard` (Host, Origin,
//! token; security headers); `limits` bounds connections and their timeouts; `tls` serves HTTPS.
//! The pipeline talks to it only through `hub::LiveHub`, which never waits on a client.
//!
//! Protocol, endpoints and the security model: docs/serve.md.

pub(crate) mod address;
mod conn;
pub(crate) mod display;
mod guard;
pub(crate) mod hub;
mod limits;
pub(crate) mod metrics;
pub(crate) mod options;
pub(crate) mod spectra;
mod tls;
pub(crate) mod ws;

use crate::error::{FftdError, Result};
use axum::extract::rejection::QueryRejection;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Query, State, WebSocketUpgrade};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hub::LiveHub;
use options::ServeSettings;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Display rows per second per stream, at most.
pub(crate) const DISPLAY_FPS: u32 = 60;

/// How long open responses may take to end after a shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

const PAGE: &str = include_str!("../../assets/serve/index.html");
const SCRIPT: &str = include_str!("../../assets/serve/app.js");
const STYLE: &str = include_str!("../../assets/serve/app.css");
const XFER_SCRIPT: &str = include_str!("../../assets/serve/xfer.js");

/// A running server; `shutdown` stops it (dropping it does too).
pub(crate) struct Server {
    pub addr: SocketAddr,
    /// `--serve-tls-*`: HTTPS.
    pub https: bool,
    /// A token is required.
    pub token: bool,
    shutdown: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Clone)]
struct App {
    hub: Arc<LiveHub>,
    shutdown: watch::Receiver<bool>,
}

/// The port bound and the TLS files read: done before a run touches any file, so a taken port
/// or a bad certificate leaves them as they were.
pub(crate) struct Bound {
    listener: std::net::TcpListener,
    settings: ServeSettings,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Listens on `settings.addr` and reads the TLS files.
pub(crate) fn bind(settings: &ServeSettings) -> Result<Bound> {
    let addr = settings.addr;
    let tls = match &settings.tls {
        Some((cert, key)) => Some(tls::acceptor(cert, key)?),
        None => None,
    };
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| FftdError::Runtime(format!("--serve {addr}: cannot listen: {e}")))?;
    Ok(Bound {
        listener,
        settings: settings.clone(),
        tls,
    })
}

impl Server {
    /// Serves `bound` (from `bind`) from a thread of its own.
    pub(crate) fn start(bound: Bound, hub: Arc<LiveHub>) -> Result<Server> {
        let addr = bound
            .listener
            .local_addr()
            .map_err(|e| FftdError::Runtime(format!("--serve: {e}")))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| FftdError::Runtime(format!("--serve: cannot start the server: {e}")))?;
        let (https, token) = (bound.tls.is_some(), bound.settings.token.is_some());
        let (shutdown, stopping) = watch::channel(false);
        let app = App {
            hub,
            shutdown: stopping,
        };
        let thread = std::thread::Builder::new()
            .name("fftd-serve".into())
            .spawn(move || runtime.block_on(serve(bound, addr, app)))
            .map_err(|e| FftdError::Runtime(format!("--serve: cannot start the server: {e}")))?;
        Ok(Server {
            addr,
            https,
            token,
            shutdown,
            thread: Some(thread),
        })
    }

    /// `http://ADDR/` or `https://ADDR/`.
    pub(crate) fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}/", self.addr)
    }

    /// Closes every connection and waits for the server thread.
    pub(crate) fn shutdown(mut self) {
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

async fn serve(bound: Bound, addr: SocketAddr, app: App) {
    let listener = match tokio::net::TcpListener::from_std(bound.listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("--serve: {e}");
            return;
        }
    };
    let ticker = tokio::spawn(tick(app.hub.clone()));
    let shutdown = app.shutdown.clone();
    let guard = Arc::new(guard::Guard::new(&bound.settings, addr));
    let router = Router::new()
        .route("/", get(page))
        .route(
            "/app.js",
            get(|| asset("text/javascript; charset=utf-8", SCRIPT)),
        )
        .route("/app.css", get(|| asset("text/css; charset=utf-8", STYLE)))
        .route(
            "/xfer.js",
            get(|| asset("text/javascript; charset=utf-8", XFER_SCRIPT)),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics_text))
        .route("/api/streams", get(streams))
        .route("/spectra", get(spectra_rows))
        .route("/ws", get(websocket))
        .route("/events", get(alert_events)) // issue 27
        .fallback(not_found)
        .with_state(app)
        .layer(axum::middleware::from_fn_with_state(guard, guard::check));
    let cx = conn::Context {
        router,
        tls: bound.tls,
        timeouts: options::Timeouts::from_env(),
        max_connections: bound.settings.max_connections,
        shutdown,
    };
    // connections still open a moment after the shutdown are closed with the runtime
    conn::serve(listener, cx, SHUTDOWN_GRACE).await;
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

async fn asset(content_type: &'static str, text: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        text,
    )
        .into_response()
}

async fn not_found(uri: axum::http::Uri) -> Response {
    let why = format!(
        "fftd: no such page: {:.200} (the live view serves /, /ws, /spectra, /events, /metrics, /healthz, /api/streams)\n",
        uri.path()
    );
    (axum::http::StatusCode::NOT_FOUND, why).into_response()
}

async fn metrics_text(State(app): State<App>) -> Response {
    let text = metrics::render(&app.hub);
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
}

/// issue 27: `--alert` events and `--retry`'s gap events as server-sent events (`alerts::feed`).
async fn alert_events(State(app): State<App>) -> Response {
    let Some(feed) = app.hub.alerts.get() else {
        let why = "fftd: this run has no --alert rules or --retry inputs, so no /events\n";
        return (axum::http::StatusCode::NOT_FOUND, why).into_response();
    };
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        feed.sse_body(),
    )
        .into_response()
}

async fn streams(State(app): State<App>) -> Response {
    // issue 27: the rules' names when the run has events (--alert rules, or --retry's gaps with
    // no rules: an empty list); the page then opens /events
    if let Some(feed) = app.hub.alerts.get() {
        let body = serde_json::json!({ "streams": app.hub.streams, "alerts": feed.names() });
        return axum::Json(body).into_response();
    }
    axum::Json(serde_json::json!({ "streams": app.hub.streams })).into_response()
}

async fn spectra_rows(
    State(app): State<App>,
    query: std::result::Result<Query<spectra::Filter>, QueryRejection>,
) -> Response {
    let filter = match query {
        Ok(Query(filter)) => filter,
        Err(rejected) => return bad_query("/spectra", "stream=K&every=N", &rejected),
    };
    if filter.every == Some(0) {
        let why = "fftd: /spectra: every=0: keeps the rows whose frame number is a multiple of N, so N is at least 1\n";
        return (axum::http::StatusCode::BAD_REQUEST, why).into_response();
    }
    let streams = app.hub.streams.len();
    if let Some(stream) = filter.stream.filter(|&s| s >= streams) {
        let last = streams.saturating_sub(1);
        let why = format!("no stream {stream}: this run has streams 0 to {last}\n");
        return (axum::http::StatusCode::NOT_FOUND, why).into_response();
    }
    let body = spectra::body(app.hub.clone(), filter);
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

async fn websocket(
    State(app): State<App>,
    query: std::result::Result<Query<ws::Want>, QueryRejection>,
    upgrade: std::result::Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let want = match query {
        Ok(Query(want)) => want,
        Err(rejected) => return bad_query("/ws", "stream=K&width=N", &rejected),
    };
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejected) => {
            let why = format!(
                "fftd: /ws is a WebSocket of display rows, the page's: {:.200}\n",
                rejected.body_text()
            );
            return (rejected.status(), why).into_response();
        }
    };
    upgrade.on_upgrade(move |socket| ws::run(socket, app.hub, want, app.shutdown))
}

/// 400 with one line naming the endpoint, the query it takes (`takes`: whole numbers) and what in
/// the request's query did not parse.
fn bad_query(path: &str, takes: &str, rejected: &QueryRejection) -> Response {
    let detail = rejected.body_text();
    let detail = detail
        .strip_prefix("Failed to deserialize query string: ")
        .unwrap_or(&detail);
    let why = format!("fftd: {path}: bad query ({detail:.200}); it takes {takes}, whole numbers\n");
    (axum::http::StatusCode::BAD_REQUEST, why).into_response()
}
