// fftd live view: the page's script (index.html; served at /app.js). Kept out of the page so
// the Content-Security-Policy can forbid inline scripts.
'use strict';

// ---------------------------------------------------------------- state

const $ = (id) => document.getElementById(id);
const ui = {
  spectrum: $('spectrum'), waterfall: $('waterfall'), stream: $('stream'), pause: $('pause'),
  specmin: $('specmin'), specmax: $('specmax'), specauto: $('specauto'),
  colormap: $('colormap'), wfmin: $('wfmin'), wfmax: $('wfmax'), wfauto: $('wfauto'), cbar: $('cbar'),
  wfspeed: $('wfspeed'), tau: $('tau'), tauval: $('tauval'), peakreset: $('peakreset'), status: $('status'),
  rate: $('rate'), info: $('info'), readout: $('readout'), measure: $('measure'), xfer: $('xfer'),
};
const FLOOR = -999;                                     // dB stored for silence (-Infinity) and NaN
const MARGIN = { left: 58, right: 16, top: 12, axis: 26 };   // CSS px around the plots
const COLORS = {
  page: '#0a0d12', plot: '#070a0e', grid: '#1b2430', gridStrong: '#2a3644', label: '#8e9bab',
  live: '#4cc2ff', avg: '#ffd166', peak: '#ff6b6b', cursor: 'rgba(255,255,255,0.55)',
  alert: '#ff2d55', alertEnd: '#d0d0d0', gap: '#ffb000',
};
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const S = {
  streams: [], fps: 60,
  want: new URLSearchParams(location.search).has('stream')
    ? Number(new URLSearchParams(location.search).get('stream')) : null,
  layout: null,          // {stream, n, bins, columns, hz (ascending), uniform}
  fresh: true,           // next layout starts from nothing (new connection)
  rows: 0, shown: 0, dropped: 0, lastRow: -1, lastTime: null, layoutAt: 0,
  paused: false, ended: false,
  speed: 0,              // waterfall rows per second of the rows' time; 0: every row
  meanUnit: 10,          // how the stream's means average (see toUnit)
  unit: 'dB',            // the shown stream's level unit (calibrated: docs/measure.md)
  tau: 1.0,
  live: null, avgPow: null, avg: null, peak: null,   // Float32Array/Float64Array per column
  mouse: null,           // {target: 'spectrum'|'waterfall', x, y} in device px
  dirty: true, bgDirty: true,
  window: { t0: performance.now(), rows: 0, frames: 0 },
  perf: { raf: 0, draws: 0, drawMs: 0, maxDrawMs: 0, rowsHandled: 0, rowMs: 0, maxRowMs: 0,
    longGaps: 0, lastRaf: 0 },
};

// Each view has its own dB range: the spectrum's level axis and the waterfall's colours. In auto
// mode a range is fitted to what its view shows once rows arrive, again for each new stream and
// on a click on Auto; typing a bound makes it manual. Both are kept in localStorage.
const views = {
  spectrum: { lo: -120, hi: 0, auto: true, fitted: false, key: 'fftd.range.spectrum',
    min: ui.specmin, max: ui.specmax, button: ui.specauto, fit: fitSpectrum, apply: applySpectrumRange },
  waterfall: { lo: -120, hi: 0, auto: true, fitted: false, key: 'fftd.range.waterfall',
    min: ui.wfmin, max: ui.wfmax, button: ui.wfauto, fit: fitWaterfall, apply: applyWaterfallRange },
};

// ---------------------------------------------------------------- colour maps

// Polynomial fits of matplotlib's viridis and inferno (Matt Zucker) and Google's turbo.
const POLY = {
  viridis: [[0.2777273272234177, 0.005407344544966578, 0.3340998053353061],
    [0.1050930431085774, 1.404613529898575, 1.384590162594685],
    [-0.3308618287255563, 0.214847559468213, 0.09509516302823659],
    [-4.634230498983486, -5.799100973351585, -19.33244095627987],
    [6.228269936347081, 14.17993336680509, 56.69055260068105],
    [4.776384997670288, -13.74514537774601, -65.35303263337234],
    [-5.435455855934631, 4.645852612178535, 26.3124352495832]],
  inferno: [[0.0002189403691192265, 0.001651004631001012, -0.01948089843709184],
    [0.1065134194856116, 0.5639564367884091, 3.932712388889277],
    [11.60249308247187, -3.972853965665698, -15.9423941062914],
    [-41.70399613139459, 17.43639888205313, 44.35414519872813],
    [77.162935699427, -33.40235894210092, -81.80730925738993],
    [-71.31942824499214, 32.62606426397723, 73.20951985803202],
    [25.13112622477341, -12.24266895238567, -23.07032500287172]],
  turbo: [[0.13572138, 0.09140261, 0.10667330], [4.61539260, 2.19418839, 12.64194608],
    [-42.66032258, 4.84296658, -60.58204836], [132.13108234, -14.18503333, 110.36276771],
    [-152.94239396, 4.27729857, -89.90310912], [59.28637943, 2.82956604, 27.34824973]],
};

const lut = new Uint8ClampedArray(256 * 4);             // RGBA per level 0..255
const lut32 = new Uint32Array(lut.buffer);              // the same, one pixel per entry

function buildLut(name) {
  for (let i = 0; i < 256; i++) {
    const t = i / 255;
    let rgb = [t, t, t];
    if (POLY[name]) {
      rgb = [0, 0, 0];
      const c = POLY[name];
      for (let k = c.length - 1; k >= 0; k--) {
        for (let j = 0; j < 3; j++) rgb[j] = rgb[j] * t + c[k][j];
      }
    }
    for (let j = 0; j < 3; j++) lut[i * 4 + j] = Math.round(255 * Math.min(1, Math.max(0, rgb[j])));
    lut[i * 4 + 3] = 255;
  }
  const g = ui.cbar.getContext('2d');
  const img = g.createImageData(ui.cbar.width, 1);
  for (let x = 0; x < img.width; x++) {
    const i = Math.round(x * 255 / (img.width - 1));
    img.data.set(lut.subarray(i * 4, i * 4 + 4), x * 4);
  }
  for (let y = 0; y < ui.cbar.height; y++) g.putImageData(img, 0, y);
}

// ---------------------------------------------------------------- geometry and axis mapping

// Everything on the canvases is drawn in device pixels; both plots share x0..x1.
const G = { dpr: 1, x0: 0, x1: 1, plotW: 1, spec: null, wf: null, sentWidth: null };

function sizeCanvases() {
  G.dpr = window.devicePixelRatio || 1;
  const d = G.dpr;
  for (const c of [ui.spectrum, ui.waterfall, ui.xfer]) {
    const r = c.parentElement.getBoundingClientRect();
    const w = Math.max(1, Math.round(r.width * d)), h = Math.max(1, Math.round(r.height * d));
    if (c.width !== w) c.width = w;
    if (c.height !== h) c.height = h;
  }
  G.x0 = Math.round(MARGIN.left * d);
  G.x1 = Math.max(G.x0 + 1, ui.spectrum.width - Math.round(MARGIN.right * d));
  G.plotW = G.x1 - G.x0;
  G.spec = { y0: Math.round(MARGIN.top * d), y1: ui.spectrum.height - Math.round(MARGIN.axis * d) };
  G.wf = { y0: 0, y1: ui.waterfall.height };
  resizeRing(G.wf.y1 - G.wf.y0);
  S.bgDirty = S.dirty = true;
}

function columns() { return S.layout ? S.layout.columns : 0; }

// Fractional column index (0 = centre of the first column) at device x, and back.
function xToIndex(x) { return (x - G.x0) * columns() / G.plotW - 0.5; }
function indexToX(f) { return G.x0 + (f + 0.5) * G.plotW / columns(); }
function xToColumn(x) {
  const c = columns();
  return Math.min(c - 1, Math.max(0, Math.floor((x - G.x0) * c / G.plotW)));
}

function xToHz(x) {
  const hz = S.layout.hz, n = hz.length;
  if (n === 1) return hz[0];
  const f = xToIndex(x), i = Math.min(n - 2, Math.max(0, Math.floor(f)));
  return hz[i] + (f - i) * (hz[i + 1] - hz[i]);
}

function hzToX(v) {
  const hz = S.layout.hz, n = hz.length;
  if (n === 1) return indexToX(0);
  let lo = 0, hi = n - 2;                               // the segment [hz[i], hz[i+1]] holding v
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (hz[mid] <= v) lo = mid; else hi = mid - 1;
  }
  return indexToX(lo + (v - hz[lo]) / (hz[lo + 1] - hz[lo]));
}

function dbToY(v) {
  const { y0, y1 } = G.spec, { lo, hi } = views.spectrum;
  return y1 - (v - lo) / (hi - lo) * (y1 - y0);
}

// ---------------------------------------------------------------- axes and formats

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

function decimalsFor(step) { return Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9))); }

function hzUnit(maxAbs) {
  return maxAbs >= 1e9 ? [1e9, 'GHz'] : maxAbs >= 1e6 ? [1e6, 'MHz'] : maxAbs >= 1e3 ? [1e3, 'kHz'] : [1, 'Hz'];
}

// Frequency ticks: evenly spaced columns get linear 1-2-5 ticks; bands (uneven) 1-2-5 per decade.
function freqTicks() {
  const L = S.layout, hz = L.hz, lo = hz[0], hi = hz[hz.length - 1];
  const [scale, unit] = hzUnit(Math.max(Math.abs(lo), Math.abs(hi)));
  const ticks = [];
  if (L.uniform || lo <= 0) {
    const step = niceStep((hi - lo || 1) * 95 * G.dpr / G.plotW);
    const dec = decimalsFor(step / scale);
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      ticks.push({ x: hzToX(v), text: (Math.abs(v) < step * 1e-9 ? 0 : v / scale).toFixed(dec) });
    }
  } else {
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of [1, 2, 5]) {
        const v = m * Math.pow(10, e);
        if (v < lo || v > hi) continue;
        ticks.push({ x: hzToX(v), text: String(+(v / scale).toPrecision(3)) });
      }
    }
  }
  return { ticks, unit };
}

function fmtHz(v) {
  const [scale, unit] = hzUnit(Math.abs(v));
  return `${+(v / scale).toPrecision(4)} ${unit}`;
}

function fmtDb(v) { return v <= FLOOR ? `-inf ${S.unit}` : `${v.toFixed(1)} ${S.unit}`; }

// What the shown stream's levels are: the calibrated unit, or |H1| of a pair (--cross).
function streamInfo(id) { return S.streams.find((x) => x.id === id); }
function levelLabel() {
  const s = S.layout && streamInfo(S.layout.stream);
  return s && s.cross ? '|H1| (dB)' : `level (${S.unit})`;
}

// The readout always shows the frequency in Hz as a number, and in kHz/MHz once Hz gets long.
function fmtReadoutHz(v) {
  const L = S.layout, n = L.hz.length;
  const spacing = n > 1 ? Math.abs(L.hz[n - 1] - L.hz[0]) / (n - 1) : 1;
  const dec = Math.max(1, Math.min(4, decimalsFor(spacing) + 1));
  const hz = `f = ${v.toFixed(dec)} Hz`;
  return Math.abs(v) >= 1e4 ? `${hz} (${fmtHz(v)})` : hz;
}

// ---------------------------------------------------------------- waterfall ring buffer

// One row per device-pixel row (the max of each column, shown; the mean, in the readout; the
// frames and the time of the first); ring index `head` is the newest row. The image `wf.canvas`
// (C x cap) holds the max rows coloured, so drawing is two drawImage calls.
const wf = { cap: 0, C: 0, head: 0, count: 0, pushed: 0, vals: null, means: null, frames: null,
  time: null, canvas: null, ctx: null, rowImg: null, rowPx: null };

function allocRing(cap, C) {
  const old = wf.vals ? { ...wf } : null;
  wf.cap = Math.max(1, cap); wf.C = C;
  wf.vals = new Float32Array(wf.cap * Math.max(1, C));
  wf.means = new Float32Array(wf.vals.length);
  wf.frames = new Uint32Array(wf.cap);
  wf.time = new Float64Array(wf.cap);
  wf.head = 0; wf.count = 0;
  wf.canvas = document.createElement('canvas');
  wf.canvas.width = Math.max(1, C); wf.canvas.height = wf.cap;
  wf.ctx = wf.canvas.getContext('2d');
  wf.rowImg = wf.ctx.createImageData(Math.max(1, C), 1);
  wf.rowPx = new Uint32Array(wf.rowImg.data.buffer);
  acc.bin = NaN;
  return old;
}

// Keeps the newest rows (as many as fit) when the plot height changes.
function resizeRing(cap) {
  if (cap === wf.cap && wf.vals) return;
  const bin = acc.bin, old = allocRing(cap, wf.C);
  if (old && old.C === wf.C) { copyRows(old, (src) => src); acc.bin = bin; }   // the newest still grows
  repaintWaterfall();
}

// Copies the old ring's rows, newest first, through `map` (old row -> new row of wf.C values).
function copyRows(old, map) {
  const n = Math.min(old.count, wf.cap);
  for (let y = 0; y < n; y++) {
    const i = (old.head + y) % old.cap, from = i * old.C, to = (i + 1) * old.C;
    wf.vals.set(map(old.vals.subarray(from, to)), y * wf.C);
    wf.means.set(map(old.means.subarray(from, to)), y * wf.C);
    wf.time[y] = old.time[i]; wf.frames[y] = old.frames[i];
  }
  wf.head = 0; wf.count = n;
}

function paintRow(vals, out) {
  const { lo, hi } = views.waterfall, k = 255 / (hi - lo);
  for (let i = 0; i < vals.length; i++) {
    const v = (vals[i] - lo) * k;
    out[i] = lut32[v <= 0 ? 0 : v >= 255 ? 255 : v | 0];
  }
}

// Colours ring row `i` into the image.
function paintRingRow(i) {
  paintRow(wf.vals.subarray(i * wf.C, (i + 1) * wf.C), wf.rowPx);
  wf.ctx.putImageData(wf.rowImg, 0, i);
}

function pushRow(max, mean, frames, time) {
  wf.head = (wf.head - 1 + wf.cap) % wf.cap;
  if (wf.count < wf.cap) wf.count++;
  wf.pushed++;
  wf.vals.set(max, wf.head * wf.C);
  wf.means.set(mean, wf.head * wf.C);
  wf.time[wf.head] = time; wf.frames[wf.head] = frames;
  paintRingRow(wf.head);
}

// ---------------------------------------------------------------- waterfall speed

// At a speed of R rows/s the rows whose times fall in the same 1/R s of the stream make one
// waterfall row, folded as the server folds frames into a display row (src/serve/display.rs
// `Fold`): the max of their max, the mean of their means weighted by frames and taken in the
// stream's own unit (power; amplitude for --scale magnitude; dB for --scale db), the time of the
// first. The newest row grows in place until a row of the next 1/R s comes. Speed 0: every row.
const acc = { bin: NaN, sum: new Float64Array(0) };    // sum: frames x mean in the unit, per column

// The server's `Level`: 10 for power, 20 for amplitude, 0 for values already in dB.
function meanUnit(scale) { return scale === 'magnitude' ? 20 : scale === 'db' ? 0 : 10; }
function toUnit(db, k) { return k ? (db <= FLOOR ? 0 : Math.pow(10, db / k)) : (db <= FLOOR ? -Infinity : db); }
function fromUnit(v, k) { const db = k ? k * Math.log10(v) : v; return db > FLOOR ? db : FLOOR; }

function addToWaterfall(max, mean, frames, time) {
  const bin = S.speed > 0 ? Math.floor(time * S.speed) : NaN;
  if (bin <= acc.bin && wf.count > 0) { foldRow(max, mean, frames, time); return; }   // NaN: false
  pushRow(max, mean, frames, time);
  acc.bin = bin;
  if (Number.isNaN(bin)) return;                        // every row: nothing will fold into it
  if (acc.sum.length !== wf.C) acc.sum = new Float64Array(wf.C);
  const f = Math.max(1, frames), k = S.meanUnit;
  for (let i = 0; i < wf.C; i++) acc.sum[i] = f * toUnit(mean[i], k);
}

// Folds a row into the newest waterfall row and recolours it.
function foldRow(max, mean, frames, time) {
  const h = wf.head, base = h * wf.C, k = S.meanUnit, f = Math.max(1, frames);
  const n = wf.frames[h] += f;
  for (let i = 0; i < wf.C; i++) {
    if (max[i] > wf.vals[base + i]) wf.vals[base + i] = max[i];
    acc.sum[i] += f * toUnit(mean[i], k);
    wf.means[base + i] = fromUnit(acc.sum[i] / n, k);
  }
  if (time < wf.time[h]) wf.time[h] = time;
  paintRingRow(h);
}

function setSpeed(v) {
  S.speed = [0, 30, 15, 5, 1].includes(v) ? v : 0;
  ui.wfspeed.value = String(S.speed);
  acc.bin = NaN;                                        // the next row starts a waterfall row
}

// Recolours every stored row (after a colour map, range, size or layout change).
function repaintWaterfall() {
  if (!wf.C) return;
  const img = wf.ctx.createImageData(wf.C, wf.cap);
  const px = new Uint32Array(img.data.buffer);
  const empty = new Uint8ClampedArray([7, 10, 14, 255]);
  const bg = new Uint32Array(empty.buffer)[0];
  px.fill(bg);
  for (let y = 0; y < wf.count; y++) {
    const i = (wf.head + y) % wf.cap;
    paintRow(wf.vals.subarray(i * wf.C, (i + 1) * wf.C), px.subarray(i * wf.C, (i + 1) * wf.C));
  }
  wf.ctx.putImageData(img, 0, 0);
  S.dirty = true;
}

// ---------------------------------------------------------------- layouts and rows

function onLayout(m) {
  const hz = Float64Array.from(m.columns_hz);   // ascending: the server sorts the columns
  let uniform = true;
  if (hz.length > 2) {
    const d = (hz[hz.length - 1] - hz[0]) / (hz.length - 1);
    for (let i = 1; i < hz.length && uniform; i++) uniform = Math.abs(hz[i] - hz[i - 1] - d) <= 0.01 * Math.abs(d);
  }
  S.layoutAt = performance.now();
  const prev = S.layout;
  const next = { stream: m.stream, n: m.n, bins: m.bins, columns: m.columns, hz, uniform };
  const sameStream = prev && prev.stream === m.stream && !S.fresh;
  if (sameStream && sameHz(prev.hz, hz)) { S.layout = next; return; }
  S.layout = next;
  if (sameStream) {
    // Only the width changed: resample what is shown by frequency (the server sends no history).
    const map = columnMap(prev.hz, hz);
    const pick = (a) => { const o = new a.constructor(hz.length); for (let j = 0; j < o.length; j++) o[j] = a[map[j]]; return o; };
    const old = allocRing(wf.cap, m.columns);
    copyRows(old, pick);
    for (const k of ['live', 'avgPow', 'avg', 'peak']) if (S[k]) S[k] = pick(S[k]);
  } else {
    allocRing(wf.cap, m.columns);
    S.live = S.avgPow = S.avg = S.peak = null;
    S.lastRow = -1; S.lastTime = null; S.ended = false;
    for (const v of Object.values(views)) v.fitted = false;
    if (prev && prev.stream !== m.stream) S.shown = 0;
  }
  const meta = S.streams.find((x) => x.id === m.stream);
  S.meanUnit = meanUnit(meta && meta.scale);
  S.unit = (meta && meta.unit) || 'dB';
  xferShow(Boolean(meta && meta.cross));
  S.fresh = false;
  repaintWaterfall();
  ui.stream.value = String(m.stream);
  if (!prev || prev.stream !== m.stream) readMeasurements(m.stream);
  showInfo();
  S.bgDirty = S.dirty = true;
}

// ---------------------------------------------------------------- measurements readout
// With --levels/--peaks/--distortion the shown stream's /spectra rows carry them (docs/measure.md):
// read them there and show the latest (at most 4 times a second); a run without measurements is
// seen at its first row, and the request is dropped. A pair's rows (--cross) go to the
// transfer-function panel (xfer.js), every one.

let measureReader = null, measureFor = null;

function fmtLevel(v) { return v === null || v === undefined ? '–' : v.toFixed(1); }

function measureText(r) {
  const parts = [], unit = r.unit || '';
  if (r.leq !== undefined) {
    parts.push(`Leq ${fmtLevel(r.leq)}`, `LFmax ${fmtLevel(r.lfmax)}`, `LFmin ${fmtLevel(r.lfmin)}`,
      `LSmax ${fmtLevel(r.lsmax)}`, `LSmin ${fmtLevel(r.lsmin)} ${unit}`);
  }
  for (const [i, p] of (r.peaks || []).entries()) {
    if (p.hz !== null) parts.push(`peak${i + 1} ${fmtHz(p.hz)} ${fmtLevel(p.db)} ${unit}`);
  }
  // (ratios: dB, not the unit; THD is – when no harmonic lies below Nyquist)
  if (r.thd_db !== undefined) parts.push(`THD ${fmtLevel(r.thd_db)} dB`, `THD+N ${fmtLevel(r.thdn_db)} dB`, `SNR ${fmtLevel(r.snr_db)} dB`);
  return parts.length ? parts.join(' · ') : null;
}

async function readMeasurements(stream) {
  if (measureReader && measureFor === stream) return;   // already reading (or known to be empty)
  if (measureReader) measureReader.abort();
  const ctl = measureReader = new AbortController();
  measureFor = stream;
  ui.measure.hidden = true;
  let shownAt = 0, buf = '';
  try {
    const res = await fetch(`/spectra?stream=${stream}`, { signal: ctl.signal });
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done || ctl !== measureReader) return;
      buf += dec.decode(value, { stream: true });
      const end = buf.lastIndexOf('\n');
      if (end < 0) continue;
      const lines = buf.slice(0, end).split('\n').filter((l) => l.startsWith('{"stream"'));
      buf = buf.slice(end + 1);
      if (!lines.length) continue;
      const row = JSON.parse(lines[lines.length - 1]);
      if (row.coherence) { xferRow(row); continue; }
      const text = measureText(row);
      if (text === null) { ctl.abort(); return; }   // no measurements in this run
      const now = performance.now();
      if (now - shownAt > 250) { shownAt = now; ui.measure.textContent = text; ui.measure.hidden = false; }
    }
  } catch (e) { /* aborted, or the run ended */ }
}

function sameHz(a, b) { return a.length === b.length && a.every((v, i) => v === b[i]); }

// For each new column, the old column nearest in frequency.
function columnMap(oldHz, newHz) {
  const map = new Uint32Array(newHz.length);
  let i = 0;
  for (let j = 0; j < newHz.length; j++) {
    while (i + 1 < oldHz.length && Math.abs(oldHz[i + 1] - newHz[j]) <= Math.abs(oldHz[i] - newHz[j])) i++;
    map[j] = i;
  }
  return map;
}

const scratch = { max: new Float32Array(0), mean: new Float32Array(0) };

// Reads C values from `buf` at `offset` into `out` in display order, silence clamped to FLOOR.
function readColumns(buf, offset, C, out) {
  const src = LITTLE_ENDIAN ? new Float32Array(buf, offset, C) : null;
  const dv = src ? null : new DataView(buf, offset, 4 * C);
  for (let j = 0; j < C; j++) {
    const v = src ? src[j] : dv.getFloat32(4 * j, true);
    out[j] = v > FLOOR ? (v < 1e6 ? v : 1e6) : FLOOR;   // NaN and -Infinity -> FLOOR
  }
}

function onRow(buf) {
  const t0 = performance.now();
  S.rows++;
  const dv = new DataView(buf);
  const L = S.layout;
  const stream = dv.getUint32(0, true), frames = dv.getUint32(4, true);
  const time = dv.getFloat64(8, true);
  const C = dv.getUint32(24, true), number = dv.getUint32(28, true);
  // (rows are numbered per stream as the server makes them; a row can hold frames older than the
  // previous row's, so the frame number says nothing about repeats)
  if (!L || stream !== L.stream || C !== L.columns || buf.byteLength < 32 + 8 * C || number <= S.lastRow) {
    S.dropped++;                       // a row of the previous stream or width, or a repeat
    return;
  }
  S.lastRow = number;
  if (t0 - S.layoutAt > 250) { S.window.rows++; S.window.frames += frames; }   // not the history
  if (S.paused) return;
  if (scratch.max.length !== C) { scratch.max = new Float32Array(C); scratch.mean = new Float32Array(C); }
  readColumns(buf, 32, C, scratch.max);
  readColumns(buf, 32 + 4 * C, C, scratch.mean);
  updateTraces(scratch.max, scratch.mean, time);
  addToWaterfall(scratch.max, scratch.mean, frames, time);
  S.shown++;
  for (const v of Object.values(views)) {
    if (v.auto && !v.fitted && S.shown >= 24) { v.fitted = true; fitRange(v); }
  }
  S.dirty = true;
  const ms = performance.now() - t0;
  S.perf.rowsHandled++; S.perf.rowMs += ms; S.perf.maxRowMs = Math.max(S.perf.maxRowMs, ms);
}

// live = the row's max; average = exponential average (in power) of the mean rows with time
// constant tau; peak = running max of the max rows.
function updateTraces(max, mean, time) {
  const C = max.length;
  if (!S.live || S.live.length !== C) {
    S.live = new Float32Array(C); S.avg = new Float32Array(mean); S.peak = new Float32Array(max);
    S.avgPow = new Float64Array(C);
    for (let i = 0; i < C; i++) S.avgPow[i] = mean[i] <= FLOOR ? 0 : Math.pow(10, mean[i] / 10);
  } else {
    let dt = S.lastTime === null ? 0 : time - S.lastTime;
    if (!(dt > 0 && dt < 10)) dt = 1 / S.fps;
    const a = 1 - Math.exp(-dt / S.tau);
    for (let i = 0; i < C; i++) {
      const p = mean[i] <= FLOOR ? 0 : Math.pow(10, mean[i] / 10);
      const q = S.avgPow[i] += a * (p - S.avgPow[i]);
      S.avg[i] = q > 0 ? Math.max(FLOOR, 10 * Math.log10(q)) : FLOOR;
      if (max[i] > S.peak[i]) S.peak[i] = max[i];
    }
  }
  S.live.set(max);
  S.lastTime = time;
}

// ---------------------------------------------------------------- dB ranges

// A range for `vals` (levels above FLOOR, sorted here) and the highest level to show: the bottom
// 5 dB under the 5th percentile (the noise floor stays in the spectrum and shows as a dark
// texture in the waterfall), the top a little over `top`; multiples of 5 dB, at least 30 dB.
function rangeOf(vals, top) {
  if (vals.length < 2 || !(top > FLOOR)) return null;
  vals.sort();                                          // typed arrays sort numerically
  let lo = Math.floor((vals[Math.floor(vals.length * 0.05)] - 5) / 5) * 5;
  const hi = Math.ceil((top + 4) / 5) * 5;
  if (hi - lo < 30) lo = hi - 30;
  return [lo, hi];
}

// The spectrum: its live and average traces, up to the peak hold.
function fitSpectrum() {
  if (!S.live) return null;
  const vals = Float32Array.from([...S.live, ...S.avg].filter((v) => v > FLOOR));
  let top = FLOOR;
  for (let i = 0; i < S.live.length; i++) top = Math.max(top, S.live[i], S.peak[i]);
  return rangeOf(vals, top);
}

// The waterfall: its newest 120 rows.
function fitWaterfall() {
  const n = Math.min(wf.count, 120), vals = new Float32Array(n * wf.C);
  let k = 0, top = FLOOR;
  for (let y = 0; y < n; y++) {
    const i = (wf.head + y) % wf.cap;
    for (const v of wf.vals.subarray(i * wf.C, (i + 1) * wf.C)) if (v > FLOOR) { vals[k++] = v; top = Math.max(top, v); }
  }
  return rangeOf(vals.subarray(0, k), top);
}

function fitRange(v) {
  const r = v.fit();
  if (r) setRange(v, r[0], r[1]);
}

function setRange(v, lo, hi) {
  if (!(hi > lo)) return;
  v.lo = lo; v.hi = hi;
  v.min.value = lo; v.max.value = hi;
  v.apply();
  S.dirty = true;
}

function applySpectrumRange() { S.bgDirty = S.dirty = true; }

function applyWaterfallRange() {
  const { lo, hi } = views.waterfall;
  ui.cbar.title = `colour map: ${lo} dB (left) to ${hi} dB (right)`;
  repaintWaterfall();
}

// Auto on: fit now (or once rows arrive); off: the typed range stays.
function setAuto(v, on) {
  v.auto = on;
  v.button.setAttribute('aria-pressed', String(on));
  if (on) { v.fitted = S.shown >= 24; fitRange(v); }
  saveRange(v);
}

function readRange(v) {
  const lo = parseFloat(v.min.value), hi = parseFloat(v.max.value);
  if (!(Number.isFinite(lo) && Number.isFinite(hi) && hi > lo)) return;   // e.g. half typed
  setRange(v, lo, hi);
  setAuto(v, false);
}

function saveRange(v) { store(v.key, v.auto ? 'auto' : JSON.stringify([v.lo, v.hi])); }

function loadRange(v) {
  let r = null;
  try { r = JSON.parse(load(v.key)); } catch (_) { /* nothing kept, or not JSON */ }
  if (Array.isArray(r) && r.length === 2 && r.every(Number.isFinite) && r[1] > r[0]) {
    setRange(v, r[0], r[1]);
    v.auto = false;
    v.button.setAttribute('aria-pressed', 'false');
  }
}

// ---------------------------------------------------------------- drawing

const specBg = document.createElement('canvas');

const MONO = getComputedStyle(document.documentElement).getPropertyValue('--mono').trim() || 'monospace';
function font(px) { return `${Math.round(px * G.dpr)}px ${MONO}`; }

// The spectrum's static layer: panel, dB grid and labels, frequency grid and labels.
function drawSpectrumBackground() {
  const c = ui.spectrum, d = G.dpr, { y0, y1 } = G.spec;
  specBg.width = c.width; specBg.height = c.height;
  const g = specBg.getContext('2d');
  g.fillStyle = COLORS.page; g.fillRect(0, 0, c.width, c.height);
  g.fillStyle = COLORS.plot; g.fillRect(G.x0, y0, G.plotW, y1 - y0);
  g.lineWidth = Math.max(1, Math.round(d));
  g.font = font(11); g.fillStyle = COLORS.label;

  const { lo, hi } = views.spectrum;
  const step = niceStep((hi - lo) * 34 * d / Math.max(1, y1 - y0));
  g.textAlign = 'right'; g.textBaseline = 'middle';
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) {
    const y = Math.round(dbToY(v)) + 0.5;
    g.strokeStyle = COLORS.grid; g.beginPath(); g.moveTo(G.x0, y); g.lineTo(G.x1, y); g.stroke();
    g.fillText(String(+v.toFixed(decimalsFor(step))), G.x0 - 7 * d, y);
  }
  g.save(); g.translate(14 * d, (y0 + y1) / 2); g.rotate(-Math.PI / 2);
  g.textAlign = 'center'; g.fillText(levelLabel(), 0, 0); g.restore();

  g.textBaseline = 'top';
  if (S.layout) {
    const { ticks, unit } = freqTicks();
    let last = -Infinity;
    for (const t of ticks) {
      const x = Math.round(t.x) + 0.5;
      if (x < G.x0 - 1 || x > G.x1 + 1) continue;
      g.strokeStyle = COLORS.grid; g.beginPath(); g.moveTo(x, y0); g.lineTo(x, y1 + 4 * d); g.stroke();
      const w = g.measureText(t.text).width;
      if (x - w / 2 < last + 8 * d || x + w / 2 > c.width) continue;
      g.textAlign = 'center'; g.fillText(t.text, x, y1 + 7 * d);
      last = x + w / 2;
    }
    g.textAlign = 'left'; g.fillStyle = COLORS.label;
    g.fillText(unit, 4 * d, y1 + 7 * d);
  } else {
    g.textAlign = 'center'; g.textBaseline = 'middle';
    g.fillText('waiting for data…', G.x0 + G.plotW / 2, (y0 + y1) / 2);
  }
  g.strokeStyle = COLORS.gridStrong;
  g.strokeRect(G.x0 - 0.5, y0 - 0.5, G.plotW + 1, y1 - y0 + 1);
  S.bgDirty = false;
}

function trace(g, vals, color, width, fill) {
  const C = vals.length, y1 = G.spec.y1;
  g.beginPath();
  for (let i = 0; i < C; i++) {
    const x = indexToX(i), y = dbToY(vals[i]);
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  }
  g.strokeStyle = color; g.lineWidth = width * G.dpr; g.lineJoin = 'round';
  if (fill) {
    g.save();
    g.lineTo(indexToX(C - 1), y1); g.lineTo(indexToX(0), y1); g.closePath();
    g.fillStyle = fill; g.fill(); g.restore();
    g.beginPath();
    for (let i = 0; i < C; i++) {
      const x = indexToX(i), y = dbToY(vals[i]);
      if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
    }
  }
  g.stroke();
}

let liveFill = null;

function drawSpectrum() {
  const g = ui.spectrum.getContext('2d'), d = G.dpr, { y0, y1 } = G.spec;
  if (S.bgDirty) { drawSpectrumBackground(); liveFill = null; }
  g.drawImage(specBg, 0, 0);
  if (!S.live) return;
  g.save();
  g.beginPath(); g.rect(G.x0, y0, G.plotW, y1 - y0); g.clip();
  if (!liveFill) {
    liveFill = g.createLinearGradient(0, y0, 0, y1);
    liveFill.addColorStop(0, 'rgba(76,194,255,0.30)'); liveFill.addColorStop(1, 'rgba(76,194,255,0.02)');
  }
  trace(g, S.peak, COLORS.peak, 1, null);
  trace(g, S.live, COLORS.live, 1.25, liveFill);
  trace(g, S.avg, COLORS.avg, 1.5, null);
  g.restore();

  // legend
  g.font = font(11); g.textBaseline = 'middle'; g.textAlign = 'left';
  let x = G.x0 + 10 * d;
  const y = y0 + 11 * d;
  for (const [name, color] of [['live (max)', COLORS.live], [`average τ ${fmtTau(S.tau)}`, COLORS.avg], ['peak hold', COLORS.peak]]) {
    g.fillStyle = color; g.fillRect(x, y - d, 14 * d, 2 * d);
    g.fillStyle = COLORS.label; g.fillText(name, x + 19 * d, y);
    x += (28 + g.measureText(name).width / d) * d;
  }
}

const wfTicks = [];       // the time axis as last drawn: {row (from the newest), t (s)}, for tests

function drawWaterfall() {
  const c = ui.waterfall, g = c.getContext('2d'), d = G.dpr, { y0, y1 } = G.wf;
  wfTicks.length = 0;
  g.fillStyle = COLORS.page; g.fillRect(0, 0, c.width, c.height);
  g.fillStyle = COLORS.plot; g.fillRect(G.x0, y0, G.plotW, y1 - y0);
  if (!wf.C) return;
  g.imageSmoothingEnabled = false;
  const top = wf.cap - wf.head;                          // ring rows head..cap-1 go first
  g.drawImage(wf.canvas, 0, wf.head, wf.C, top, G.x0, y0, G.plotW, top);
  if (wf.head > 0) g.drawImage(wf.canvas, 0, 0, wf.C, wf.head, G.x0, y0 + top, G.plotW, wf.head);

  // time axis: a tick where the rows' time crosses a multiple of the step
  if (wf.count < 2) return;
  const tNew = wf.time[wf.head], tOld = wf.time[(wf.head + wf.count - 1) % wf.cap];
  if (!(tNew > tOld)) return;
  // a label every 64 px or so, and at least one in what is drawn: a short waterfall (or one of
  // rows at several speeds) whose 64 px span more than its rows' time still gets its times
  const span = tNew - tOld;
  const step = Math.min(niceStep(span / (wf.count - 1) * 64 * d), niceStep(span / 4));
  const dec = decimalsFor(step);
  g.font = font(11); g.fillStyle = COLORS.label; g.textAlign = 'right'; g.textBaseline = 'middle';
  g.strokeStyle = COLORS.gridStrong; g.lineWidth = Math.max(1, Math.round(d));
  let prev = Math.floor(tNew / step), lastY = -Infinity;
  for (let y = 1; y < wf.count; y++) {
    const k = Math.floor(wf.time[(wf.head + y) % wf.cap] / step);
    if (k === prev) continue;
    prev = k;
    if (y - lastY < 18 * d || y > y1 - 6 * d) continue;
    const yy = y0 + y + 0.5;
    g.beginPath(); g.moveTo(G.x0 - 5 * d, yy); g.lineTo(G.x0, yy); g.stroke();
    g.fillText(`${((k + 1) * step).toFixed(dec)} s`, G.x0 - 7 * d, yy);
    wfTicks.push({ row: y, t: (k + 1) * step });
    lastY = y;
  }
}

function drawCursor() {
  const m = S.mouse;
  if (!m || !S.layout) return;
  const d = G.dpr, x = Math.round(m.x) + 0.5;
  for (const [c, area] of [[ui.spectrum, G.spec], [ui.waterfall, G.wf]]) {
    const g = c.getContext('2d');
    g.save();
    g.strokeStyle = COLORS.cursor; g.lineWidth = Math.max(1, Math.round(d)); g.setLineDash([4 * d, 3 * d]);
    g.beginPath(); g.moveTo(x, area.y0); g.lineTo(x, area.y1);
    if (c.id === m.target) { const y = Math.round(m.y) + 0.5; g.moveTo(G.x0, y); g.lineTo(G.x1, y); }
    g.stroke();
    if (c === ui.spectrum && S.live) {
      const col = xToColumn(m.x);
      g.setLineDash([]); g.fillStyle = COLORS.live;
      g.beginPath(); g.arc(indexToX(col), dbToY(S.live[col]), 3.5 * d, 0, 2 * Math.PI); g.fill();
    }
    g.restore();
  }
}

let readoutText = '';

function updateReadout() {
  const m = S.mouse;
  let text = 'move the cursor over the plots';
  if (m && m.target === 'xfer') {
    text = xferReadout(m.x);
  } else if (m && S.layout && S.live) {
    const col = xToColumn(m.x), f = fmtReadoutHz(S.layout.hz[col]);   // the column's centre
    if (m.target === 'spectrum') {
      text = `${f}   ${fmtDb(S.live[col])}   avg ${fmtDb(S.avg[col])}   peak ${fmtDb(S.peak[col])}`;
    } else {
      const y = Math.floor(m.y - G.wf.y0);
      if (y >= 0 && y < wf.count) {
        const i = (wf.head + y) % wf.cap, at = i * wf.C + col;
        text = `${f}   ${fmtDb(wf.vals[at])}   mean ${fmtDb(wf.means[at])}   t = ${wf.time[i].toFixed(3)} s`;
      } else {
        text = f;
      }
    }
  }
  if (text !== readoutText) { ui.readout.textContent = readoutText = text; }
}

function frame(now) {
  const p = S.perf;
  p.raf++;
  if (p.lastRaf && now - p.lastRaf > 50) p.longGaps++;
  p.lastRaf = now;
  if (S.dirty) {
    const t0 = performance.now();
    S.dirty = false;
    drawSpectrum();
    drawWaterfall();
    drawXfer();
    drawAlertMarks();
    drawCursor();
    updateReadout();
    const ms = performance.now() - t0;
    p.draws++; p.drawMs += ms; p.maxDrawMs = Math.max(p.maxDrawMs, ms);
  }
  const w = S.window, dt = now - w.t0;
  if (dt >= 1000) {
    const perS = w.rows * 1000 / dt;
    ui.rate.textContent = w.rows
      ? `${perS.toFixed(1)} rows/s · ${(w.frames / w.rows).toFixed(1)} frames/row`
      : '0 rows/s';
    // "every row" says what really arrives (the server's 60/s is only a cap)
    ui.wfspeed.options[0].textContent = w.rows
      ? `every row (${perS.toFixed(1)}/s now)` : `every row (up to ${S.fps}/s)`;
    w.t0 = now; w.rows = 0; w.frames = 0;
  }
  requestAnimationFrame(frame);
}

// ---------------------------------------------------------------- connection

let ws = null, backoff = 500, retry = null, widthTimer = null;

function setStatus(cls, text) { ui.status.className = cls; ui.status.textContent = text; }

function showStatus() {
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  if (S.paused) setStatus('paused', 'paused (connected)');
  else if (S.ended) setStatus('finished', 'finished: the input has ended');
  else setStatus('live', 'live');
}

function showInfo() {
  const L = S.layout, s = L && S.streams.find((x) => x.id === L.stream);
  ui.info.textContent = L
    ? `${s ? `${fmtHz(s.rate)} ${s.kind} · ` : ''}n ${L.n} · ${L.bins} bins → ${L.columns} columns`
    : '';
}

function connect() {
  retry = null;
  const q = new URLSearchParams();
  if (S.want !== null && Number.isFinite(S.want)) q.set('stream', S.want);
  if (G.plotW > 1) q.set('width', G.plotW);
  G.sentWidth = G.plotW;
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws?${q}`;
  setStatus('', 'connecting…');
  const sock = ws = new WebSocket(url);
  sock.binaryType = 'arraybuffer';
  sock.onmessage = (e) => {
    if (sock !== ws) return;
    if (typeof e.data === 'string') onText(JSON.parse(e.data)); else onRow(e.data);
  };
  sock.onclose = () => {
    if (sock !== ws) return;
    ws = null; S.fresh = true;
    const s = backoff / 1000;
    setStatus('down', `disconnected: retrying in ${s.toFixed(1)} s`);
    retry = setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 10000);
  };
}

function onText(m) {
  if (m.type === 'hello') {
    backoff = 500; S.fresh = true;
    S.streams = m.streams || []; S.fps = m.fps || 60;
    ui.wfspeed.options[0].textContent = `every row (up to ${S.fps}/s)`;
    ui.stream.replaceChildren(...S.streams.map((s) => {
      const o = document.createElement('option');
      o.value = String(s.id);
      o.textContent = `${s.id}: ${s.name.split(/[\\/]/).pop()} · ${fmtHz(s.rate)} ${s.kind}`;
      o.title = s.name;
      return o;
    }));
    ui.stream.disabled = S.streams.length < 2;
    ui.stream.value = String(m.stream);
    // a pair's panel and the /spectra reader start now: a pair's one row at the end of the input
    // (no --average) comes before its display row's layout
    const info = streamInfo(m.stream);
    xferShow(Boolean(info && info.cross));
    readMeasurements(m.stream);
    showStatus();
  } else if (m.type === 'layout') {
    onLayout(m);
    showStatus();
  } else if (m.type === 'end') {
    if (S.layout && m.stream === S.layout.stream) { S.ended = true; showStatus(); }
  }
}

function send(obj) { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj)); }

// The server reduces rows to the plot's width in device pixels; tell it again after a resize.
function sendWidthSoon() {
  clearTimeout(widthTimer);
  widthTimer = setTimeout(() => {
    if (G.plotW !== G.sentWidth && ws && ws.readyState === WebSocket.OPEN) {
      G.sentWidth = G.plotW;
      send({ width: G.plotW });
    }
  }, 250);
}

// ---------------------------------------------------------------- controls

function tauFromSlider(v) { return 0.05 * Math.pow(400, v / 100); }     // 50 ms .. 20 s, log
function fmtTau(t) { return t < 1 ? `${Math.round(t * 1000)} ms` : `${t.toFixed(1)} s`; }

function togglePause() {
  S.paused = !S.paused;
  ui.pause.setAttribute('aria-pressed', String(S.paused));
  ui.pause.textContent = S.paused ? 'Resume' : 'Pause';
  S.lastTime = null;
  acc.bin = NaN;                                        // no waterfall row spans a pause
  showStatus();
}

// Settings kept in localStorage (absent in some private modes: then they last as long as the page).
function store(key, value) {
  try { localStorage.setItem(key, value); } catch (_) { /* private mode */ }
}
function load(key) {
  try { return localStorage.getItem(key); } catch (_) { return null; }
}

function onMouse(e) {
  const c = e.currentTarget, r = c.getBoundingClientRect();
  const x = (e.clientX - r.left) * G.dpr, y = (e.clientY - r.top) * G.dpr;
  S.mouse = x >= G.x0 && x < G.x1 ? { target: c.id, x, y } : null;
  S.dirty = true;
}

ui.stream.addEventListener('change', () => {
  S.want = Number(ui.stream.value);
  send({ stream: S.want });
  const q = new URLSearchParams(location.search);
  q.set('stream', S.want);
  history.replaceState(null, '', `?${q}`);
});
ui.pause.addEventListener('click', togglePause);
for (const v of Object.values(views)) {
  v.min.addEventListener('change', () => readRange(v));
  v.max.addEventListener('change', () => readRange(v));
  v.button.addEventListener('click', () => setAuto(v, true));
}
ui.colormap.addEventListener('change', () => {
  buildLut(ui.colormap.value);
  repaintWaterfall();
  store('fftd.colormap', ui.colormap.value);
});
ui.wfspeed.addEventListener('change', () => {
  setSpeed(Number(ui.wfspeed.value));
  store('fftd.wfspeed', String(S.speed));
});
ui.tau.addEventListener('input', () => {
  S.tau = tauFromSlider(+ui.tau.value);
  ui.tauval.textContent = fmtTau(S.tau);
  S.dirty = true;
});
ui.peakreset.addEventListener('click', () => { if (S.live) S.peak = new Float32Array(S.live); S.dirty = true; });
for (const c of [ui.spectrum, ui.waterfall, ui.xfer]) {
  c.addEventListener('mousemove', onMouse);
  c.addEventListener('mouseleave', () => { S.mouse = null; S.dirty = true; });
}
document.addEventListener('keydown', (e) => {
  if (e.target.closest('input, select') || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === ' ') { e.preventDefault(); togglePause(); }
  else if (e.key === 'a') for (const v of Object.values(views)) setAuto(v, true);
  else if (e.key === 'r') ui.peakreset.click();
});

// ---------------------------------------------------------------- test hook (read-only)

// ---------------------------------------------------------------- alert marks (issue 27)

// With --alert rules (or --retry inputs) the server sends each alert's start and end, and each
// outage of an input (`gap`), on /events (server-sent events); each is marked on the waterfall at
// its row: a solid line for a start, a dashed one for an end, with the rule's name; a dotted
// amber line for a gap, with its length. The newest MAX_MARKS are kept.
const MAX_MARKS = 256;
const alertEvents = [];   // {event, alert, stream, time_s, db} (gap: {event, input, gap_s, …})
const alertDrawn = [];    // the marks as last drawn: {alert, event, time_s, row}, for tests
const MARK_COLOURS = { start: 'alert', end: 'alertEnd', gap: 'gap' };
let eventsOpen = false;   // /events connected (for tests)

async function listenForAlerts() {
  let info;
  try { info = await (await fetch('/api/streams')).json(); } catch (e) { return; }
  if (!Array.isArray(info.alerts)) return;   // present (maybe empty) when the run has events
  const source = new EventSource('/events');
  source.onopen = () => { eventsOpen = true; };
  const take = (m) => {
    alertEvents.push(JSON.parse(m.data));
    if (alertEvents.length > MAX_MARKS) alertEvents.shift();
    S.dirty = true;
  };
  source.addEventListener('alert', take);
  source.addEventListener('gap', take);
}

function markLabel(e) {
  return e.event === 'gap' ? `gap ${(+e.gap_s).toFixed(1)} s${e.resumed ? '' : ' (not resumed)'}`
    : `${e.alert} ${e.event}`;
}

// The waterfall row (0: the newest) holding time `t`, or -1 when no row shown holds it.
function rowOfTime(t) {
  if (!wf.count || t > wf.time[wf.head] + 1e9) return -1;
  for (let y = 0; y < wf.count; y++) {
    if (wf.time[(wf.head + y) % wf.cap] <= t) return y;
  }
  return -1;
}

function drawAlertMarks() {
  alertDrawn.length = 0;
  if (!alertEvents.length || !S.layout) return;
  const g = ui.waterfall.getContext('2d'), d = G.dpr, { y0, y1 } = G.wf;
  g.save();
  g.lineWidth = Math.max(1, Math.round(2 * d)); g.font = font(11);
  g.textAlign = 'right'; g.textBaseline = 'bottom';
  for (const e of alertEvents) {
    if (e.stream !== S.layout.stream) continue;
    const row = rowOfTime(e.time_s);
    if (row < 0 || y0 + row > y1) continue;
    const y = y0 + row + 0.5;
    g.strokeStyle = g.fillStyle = COLORS[MARK_COLOURS[e.event] || 'alertEnd'];
    g.setLineDash(e.event === 'start' ? [] : e.event === 'gap' ? [2 * d, 2 * d] : [6 * d, 4 * d]);
    g.beginPath(); g.moveTo(G.x0, y); g.lineTo(G.x1, y); g.stroke();
    const above = row > 14 * d;   // a mark at the top has its label under it
    g.textBaseline = above ? 'bottom' : 'top';
    g.fillText(markLabel(e), G.x1 - 4 * d, above ? y - 2 * d : y + 2 * d);
    alertDrawn.push({ alert: e.alert, event: e.event, time_s: e.time_s, row, y: Math.floor(y) });
  }
  g.restore();
}

window.fftd = Object.freeze({
  get rows() { return S.rows; },
  get alertEvents() { return alertEvents.map((e) => ({ ...e })); },
  get alertMarks() { return alertDrawn.map((m) => ({ ...m })); },
  get eventsOpen() { return eventsOpen; },
  get shown() { return S.shown; },
  get dropped() { return S.dropped; },
  get stream() { return S.layout ? S.layout.stream : null; },
  get layout() { return S.layout && { ...S.layout, hz: undefined, columns_hz: Array.from(S.layout.hz) }; },
  get columnsHz() { return S.layout ? Array.from(S.layout.hz) : []; },
  get lastMax() { return S.live ? new Float32Array(S.live) : null; },
  get paused() { return S.paused; },
  get unit() { return S.unit; },
  get levelLabel() { return levelLabel(); },
  // --cross: the latest row of the pair and the panel's plots (null for other streams)
  get transfer() { return xferPublic(); },
  get ended() { return S.ended; },
  // {spectrum, waterfall}: each {lo, hi, auto, fitted}
  get ranges() {
    const pub = ({ lo, hi, auto, fitted }) => ({ lo, hi, auto, fitted });
    return { spectrum: pub(views.spectrum), waterfall: pub(views.waterfall) };
  },
  get speed() { return S.speed; },
  get wfRows() { return wf.pushed; },              // waterfall rows started since the page loaded
  // The k-th newest waterfall row (0: the newest, which may still grow): {time, frames, max, mean}.
  wfRow(k) {
    if (!(k >= 0 && k < wf.count)) return null;
    const i = (wf.head + k) % wf.cap, at = i * wf.C;
    return { time: wf.time[i], frames: wf.frames[i], max: Array.from(wf.vals.subarray(at, at + wf.C)),
      mean: Array.from(wf.means.subarray(at, at + wf.C)) };
  },
  get timeTicks() { return wfTicks.map((t) => ({ ...t })); },
  get lut() { return new Uint8ClampedArray(lut); },
  get perf() { return { ...S.perf }; },
  // Plot geometry in CSS px relative to each canvas; the plots span the same x range (xfer: the
  // transfer-function panel's three plots, top to bottom).
  get plot() {
    const d = G.dpr;
    return { dpr: d, left: G.x0 / d, right: G.x1 / d, spectrum: { top: G.spec.y0 / d, bottom: G.spec.y1 / d },
      waterfall: { top: G.wf.y0 / d, bottom: G.wf.y1 / d },
      xfer: { top: XF.plots[0].y0 / d, bottom: XF.plots[2].y1 / d } };
  },
  xToHz(cssX) { return S.layout ? xToHz(cssX * G.dpr) : null; },
  hzToX(hz) { return S.layout ? hzToX(hz) / G.dpr : null; },
});

// ---------------------------------------------------------------- start

const saved = load('fftd.colormap');
if (saved && POLY[saved] || saved === 'grey') ui.colormap.value = saved;
buildLut(ui.colormap.value);
for (const v of Object.values(views)) loadRange(v);
setSpeed(Number(load('fftd.wfspeed')));
S.tau = tauFromSlider(+ui.tau.value);
ui.tauval.textContent = fmtTau(S.tau);
sizeCanvases();
new ResizeObserver(() => { sizeCanvases(); sendWidthSoon(); })
  .observe(document.querySelector('main'));
window.addEventListener('resize', () => { if ((window.devicePixelRatio || 1) !== G.dpr) { sizeCanvases(); sendWidthSoon(); } });
connect();
requestAnimationFrame(frame);
listenForAlerts();
