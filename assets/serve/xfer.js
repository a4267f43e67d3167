// fftd live view: the transfer-function panel (`--cross A,B`, docs/measure.md; served at
// /xfer.js). Loaded before app.js, whose state (S, G, COLORS, hzToX, niceStep, ...) it reads
// only when called. For a stream whose rows are a channel pair's (`cross` in /api/streams and the
// hello), app.js hands it each `/spectra` row (csd, coherence, h1_db, h1_deg per bin): the panel
// plots the latest row's H1 = B/A as magnitude (dB) and phase (degrees), and the coherence
// (0 to 1), bin by bin on the frequency axis of the plots above (the spectrum and waterfall show
// |H1| in dB as the server folds it: live, average, peak hold, history).
'use strict';

const XF = {
  on: false, row: null, hz: null, rows: 0,
  // the three plots: name, the row's key, fixed or fitted range, colour; geometry in device px
  plots: [
    { name: '|H1| (dB)', key: 'h1_db', lo: -40, hi: 20, color: '#4cc2ff', y0: 0, y1: 1 },
    { name: 'phase (°)', key: 'h1_deg', lo: -180, hi: 180, color: '#c792ea', y0: 0, y1: 1 },
    { name: 'coherence', key: 'coherence', lo: 0, hi: 1, color: '#ffd166', y0: 0, y1: 1 },
  ],
};

// Shows the panel for a pair's stream, hides it for any other.
function xferShow(on) {
  if (XF.on === on) return;
  XF.on = on; XF.row = null;
  document.getElementById('xfer-box').hidden = !on;
  document.body.classList.toggle('cross', on);
  sizeCanvases();
}

// A `/spectra` row of the shown pair: its bins' frequencies k·rate/n (n from the layout, else the
// even frame the bins imply) and the magnitude plot's range (fitted to its finite levels).
function xferRow(r) {
  const bins = r.coherence.length, s = S.streams.find((x) => x.id === r.stream);
  const n = S.layout ? S.layout.n : 2 * (bins - 1), rate = s ? s.rate : n;
  if (!XF.hz || XF.hz.length !== bins || XF.rate !== rate || XF.n !== n) {
    XF.hz = Float64Array.from({ length: bins }, (_, k) => k * rate / n);
    XF.rate = rate; XF.n = n;
  }
  const levels = r.h1_db.filter((v) => v !== null && v > -200).sort((a, b) => a - b);
  if (levels.length) {
    const hi = Math.ceil((levels[levels.length - 1] + 3) / 10) * 10;
    const lo = Math.floor((levels[Math.floor(levels.length * 0.02)] - 3) / 10) * 10;
    XF.plots[0].hi = hi; XF.plots[0].lo = Math.min(hi - 20, Math.max(lo, hi - 120));
  }
  XF.row = r; XF.rows++;
  S.dirty = true;
}

function xferX(hz) {
  const top = XF.hz[XF.hz.length - 1] || 1;
  return S.layout ? hzToX(hz) : G.x0 + hz / top * G.plotW;
}

function xferY(p, v) { return p.y1 - (v - p.lo) / (p.hi - p.lo) * (p.y1 - p.y0); }

// The plots' rows in device px: three of equal height under a top margin, frequencies below.
function xferGeometry(c) {
  const d = G.dpr, top = Math.round(MARGIN.top * d), gap = Math.round(14 * d);
  const bottom = c.height - Math.round(MARGIN.axis * d);
  const h = Math.max(3, (bottom - top - 2 * gap) / 3);
  XF.plots.forEach((p, i) => { p.y0 = Math.round(top + i * (h + gap)); p.y1 = Math.round(p.y0 + h); });
}

function drawXfer() {
  const c = ui.xfer, g = c.getContext('2d'), d = G.dpr;
  if (!XF.on || c.width < 2) return;
  xferGeometry(c);
  g.fillStyle = COLORS.page; g.fillRect(0, 0, c.width, c.height);
  g.lineWidth = Math.max(1, Math.round(d));
  g.font = font(11);
  for (const p of XF.plots) {
    g.fillStyle = COLORS.plot; g.fillRect(G.x0, p.y0, G.plotW, p.y1 - p.y0);
    const step = p.key === 'h1_deg' ? 90 : p.key === 'coherence' ? 0.5
      : niceStep((p.hi - p.lo) * 22 * d / Math.max(1, p.y1 - p.y0));
    g.textAlign = 'right'; g.textBaseline = 'middle'; g.fillStyle = COLORS.label;
    for (let v = Math.ceil(p.lo / step) * step; v <= p.hi + 1e-9; v += step) {
      const y = Math.round(xferY(p, v)) + 0.5;
      g.strokeStyle = COLORS.grid; g.beginPath(); g.moveTo(G.x0, y); g.lineTo(G.x1, y); g.stroke();
      g.fillText(String(+v.toFixed(decimalsFor(step))), G.x0 - 7 * d, y);
    }
    g.textAlign = 'left'; g.textBaseline = 'top';
    g.fillText(p.name, G.x0 + 8 * d, p.y0 + 4 * d);
    if (XF.row) xferTrace(g, p);
    g.strokeStyle = COLORS.gridStrong;
    g.strokeRect(G.x0 - 0.5, p.y0 - 0.5, G.plotW + 1, p.y1 - p.y0 + 1);
  }
  if (!XF.row) {
    g.fillStyle = COLORS.label; g.textAlign = 'center'; g.textBaseline = 'middle';
    g.fillText('waiting for the pair\'s first estimate (one per --average group)…',
      G.x0 + G.plotW / 2, (XF.plots[1].y0 + XF.plots[1].y1) / 2);
  }
  xferAxis(g, c);
  xferCursor(g);
}

// One plot's trace: a line through the bins (a phase wrap breaks it), clipped to the plot.
function xferTrace(g, p) {
  const vals = XF.row[p.key], hz = XF.hz;
  g.save();
  g.beginPath(); g.rect(G.x0, p.y0, G.plotW, p.y1 - p.y0); g.clip();
  g.beginPath();
  let prev = null;
  for (let k = 0; k < vals.length; k++) {
    const v = vals[k];
    if (v === null || !Number.isFinite(v)) { prev = null; continue; }
    const x = xferX(hz[k]), y = xferY(p, Math.max(p.lo - 1e3, Math.min(p.hi + 1e3, v)));
    if (prev === null || (p.key === 'h1_deg' && Math.abs(v - prev) > 180)) g.moveTo(x, y); else g.lineTo(x, y);
    prev = v;
  }
  g.strokeStyle = p.color; g.lineWidth = 1.5 * G.dpr; g.lineJoin = 'round';
  g.stroke();
  g.restore();
}

function xferAxis(g, c) {
  if (!S.layout) return;
  const d = G.dpr, y1 = XF.plots[2].y1, { ticks, unit } = freqTicks();
  g.fillStyle = COLORS.label; g.textBaseline = 'top';
  let last = -Infinity;
  for (const t of ticks) {
    const x = Math.round(t.x) + 0.5, w = g.measureText(t.text).width;
    if (x < G.x0 - 1 || x > G.x1 + 1 || x - w / 2 < last + 8 * d || x + w / 2 > c.width) continue;
    g.textAlign = 'center'; g.fillText(t.text, x, y1 + 7 * d);
    last = x + w / 2;
  }
  g.textAlign = 'left'; g.fillText(unit, 4 * d, y1 + 7 * d);
}

function xferCursor(g) {
  const m = S.mouse;
  if (!m) return;
  const x = Math.round(m.x) + 0.5, d = G.dpr;
  g.save();
  g.strokeStyle = COLORS.cursor; g.lineWidth = Math.max(1, Math.round(d)); g.setLineDash([4 * d, 3 * d]);
  g.beginPath(); g.moveTo(x, XF.plots[0].y0); g.lineTo(x, XF.plots[2].y1); g.stroke();
  g.restore();
}

// The bin nearest device x.
function xferBin(x) {
  const hz = XF.hz;
  let best = 0;
  for (let k = 1; k < hz.length; k++) if (Math.abs(xferX(hz[k]) - x) < Math.abs(xferX(hz[best]) - x)) best = k;
  return best;
}

// The cursor readout over the panel: the bin's frequency, |H1|, phase and coherence.
function xferReadout(x) {
  if (!XF.row) return 'waiting for the pair\'s first estimate';
  const k = xferBin(x), r = XF.row, num = (v, dec) => (v === null ? '–' : v.toFixed(dec));
  return `f = ${XF.hz[k].toFixed(1)} Hz   |H1| ${num(r.h1_db[k], 2)} dB   phase ${num(r.h1_deg[k], 1)}°`
    + `   coherence ${num(r.coherence[k], 4)}`;
}

// For tests (window.fftd.transfer): the latest row's values and the plots in CSS px.
function xferPublic() {
  if (!XF.on) return null;
  const d = G.dpr, r = XF.row;
  return {
    rows: XF.rows,
    frame: r ? r.frame : null,
    hz: XF.hz ? Array.from(XF.hz) : [],
    h1_db: r ? r.h1_db.slice() : [], h1_deg: r ? r.h1_deg.slice() : [],
    coherence: r ? r.coherence.slice() : [],
    plots: XF.plots.map((p) => ({ name: p.name, key: p.key, lo: p.lo, hi: p.hi, color: p.color,
      top: p.y0 / d, bottom: p.y1 / d })),
  };
}
