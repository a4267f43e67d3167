#!/usr/bin/env python3
"""Alert and gap marks on the live page's waterfall (issue 27), in headless chromium through
chromedriver and selenium; run by tests/alerts_browser.rs.

    alerts_browser.py --fftd PATH --out DIR

Alerts: `fftd --file FIFO --realtime --serve --alert name=hum,band=900-1100,above=-20`; once the
page says /events is connected, 4 s of signal (8 kHz; a 1000 Hz burst from 2.0 s to 3.0 s) go
into the FIFO, no faster than real time (events are not replayed: written earlier, a page that
connects late on a busy machine would miss them). Checks: no console errors; the page received
the start and end events from /events at the burst's edges (within one frame, in signal time);
each is marked on the waterfall at the row holding its time (that row's time at or before the
event's, the next newer row's after it), the end above the start, the start in the mark colour
(the canvas pixels at the mark's row); a screenshot goes to DIR.

Gaps: `fftd --file FIFO --retry forever --serve` (no --alert, no --events) fed by a writer that
goes and a second that comes 2 s later; checks that the page received the `gap` event from
/events and marks it on the waterfall at the last row before the outage (the row above it, the
second writer's, later by the gap), in the gap colour; a screenshot goes to DIR.
"""

import argparse
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import math

os.environ.setdefault("SE_OFFLINE", "true")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

CHROMIUM = os.environ.get("FFTD_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FFTD_CHROMEDRIVER", "/usr/bin/chromedriver")
RATE, FRAME = 8000, 128


def browser(profile):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--force-device-scale-factor=1", f"--user-data-dir={profile}",
                 "--window-size=1000,800"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    driver.set_script_timeout(60)   # after_draw's wait for an animation frame: bounds a failure
    return driver


def wait_for(driver, js, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = driver.execute_script(f"return {js};")
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def after_draw(driver, body, *args):
    """Runs the JS function body `body` in an animation frame callback, after the page's own (its
    draw, registered in the frame before): the marks, rows and pixels it reads are of one draw,
    with no row between (a row moves the marks down)."""
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        f"requestAnimationFrame(() => done((() => {{ {body} }})()));", *args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fftd", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    alert_marks(args, tempfile.mkdtemp())
    gap_marks(args, tempfile.mkdtemp())


def live_view_address(fftd):
    for line in fftd.stderr:
        if "http://" in line:
            return line.split("http://")[1].split("/")[0]
    raise AssertionError("no live view address")


def gap_marks(args, tmp):
    fifo = os.path.join(tmp, "in.f32")
    os.mkfifo(fifo)
    tone = b"".join(struct.pack("<f", 0.5 * math.sin(2 * math.pi * 1000 * i / RATE))
                    for i in range(RATE))   # 1 s
    fftd = subprocess.Popen(
        [args.fftd, "--file", fifo, "--input-format", "f32", "--rate", str(RATE),
         "--frame", "256", "--retry", "forever", "--serve", "127.0.0.1:0", "--device", "cpu",
         "--quiet", "--output", "/dev/null"],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    driver = None
    writer = []
    opener = threading.Thread(target=lambda: writer.append(open(fifo, "wb")), daemon=True)
    opener.start()   # fftd's open of the FIFO waits for it
    try:
        addr = live_view_address(fftd)
        driver = browser(os.path.join(tmp, "profile"))
        driver.get(f"http://{addr}/")
        wait_for(driver, "window.fftd && window.fftd.eventsOpen", 60, "/events connected")
        opener.join(60)
        assert writer, "fftd did not open the FIFO"
        with writer[0] as w:   # the first writer: 1 s of tone, then gone
            w.write(tone)
        wait_for(driver, "window.fftd.wfRows > 0", 60, "the first writer's rows")
        # the outage is the subject: 2 s of wall time (a sleep lasts at least that long), asserted
        # as a gap of at least 0.9 s below: 1.1 s left for fftd to notice the first writer's end
        # late on a busy machine
        time.sleep(2.0)
        with open(fifo, "wb") as w:   # the second writer
            w.write(tone)
        # the gap event may come before the second writer's first row is shown: a mark with a
        # row above it
        wait_for(driver, "window.fftd && window.fftd.alertMarks.some((m) => m.event === 'gap'"
                 " && m.row >= 1)", 60, "a gap mark under a row")
        events = driver.execute_script("return window.fftd.alertEvents;")
        assert [e["event"] for e in events] == ["gap"], events
        gap = events[0]
        assert gap["resumed"] is True and gap["stream"] == 0 and gap["gap_s"] >= 0.9, gap
        # the mark, its row and the row above it, and the mark's pixels, all of one draw
        mark, rows, pixels = after_draw(
            driver,
            "const m = window.fftd.alertMarks.find((m) => m.event === 'gap');"
            "const c = document.getElementById('waterfall');"
            "const px = c.getContext('2d').getImageData(c.width / 3 | 0, m.y, 4, 1).data;"
            "return [m, [window.fftd.wfRow(m.row), window.fftd.wfRow(m.row - 1)], Array.from(px)];")
        below, above = rows
        assert above is not None, f"a row after the gap above the mark: {mark}"
        assert below["time"] <= gap["time_s"] + 1e-9, (mark, below, gap)
        assert above["time"] >= gap["time_s"] + gap["gap_s"] - 0.1, (mark, above, gap)
        colours = [pixels[i:i + 3] for i in range(0, len(pixels), 4)]
        assert [0xff, 0xb0, 0x00] in colours, f"gap colour at row {mark['y']}: {colours}"
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        driver.save_screenshot(os.path.join(args.out, "gap_marks.png"))
        print(f"gap mark {mark}; rows {rows[0]['time']} and {rows[1]['time']}; event {gap}")
    finally:
        if driver:
            driver.quit()
        fftd.terminate()
        fftd.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def alert_marks(args, tmp):
    fifo = os.path.join(tmp, "burst.f32")
    os.mkfifo(fifo)
    fftd = subprocess.Popen(
        [args.fftd, "--file", fifo, "--input-format", "f32", "--rate", str(RATE),
         "--frame", str(FRAME), "--realtime", "--serve", "127.0.0.1:0", "--device", "cpu",
         "--quiet", "--output", "/dev/null", "--alert", "name=hum,band=900-1100,above=-20"],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    driver = None
    writer = []
    opener = threading.Thread(target=lambda: writer.append(open(fifo, "wb")), daemon=True)
    opener.start()   # fftd's open of the FIFO waits for it
    try:
        addr = live_view_address(fftd)
        driver = browser(os.path.join(tmp, "profile"))
        driver.get(f"http://{addr}/")
        # /events sends what happens from the moment it is connected, nothing earlier: the signal
        # goes into the FIFO only once the page listens, so however late chromium starts (a busy
        # machine), the page sees the burst's start and end
        wait_for(driver, "window.fftd && window.fftd.eventsOpen", 60, "/events connected")
        opener.join(60)
        assert writer, "fftd did not open the FIFO"
        w = writer[0]
        # SIGNAL_S a frame at a time, each written at least a frame's time after the one before:
        # never faster than real time, so the burst's second spans many display rows (the server
        # makes at most 60 a second) however the writes are delayed; the FIFO stays open until
        # the checks are done, so the waterfall holds these rows and no later ones
        for k in range(round(SIGNAL_S * RATE / FRAME)):
            w.write(burst_signal(k * FRAME, (k + 1) * FRAME))
            w.flush()
            time.sleep(FRAME / RATE)
        wait_for(driver, "window.fftd && window.fftd.alertMarks.length >= 2", 60,
                 "a start and an end mark")
        # the marks, the rows at them and the start's pixel, all of one draw
        marks, rows, pixel = after_draw(
            driver,
            "const f = window.fftd, marks = f.alertMarks;"
            "const m = marks.find((m) => m.event === 'start');"
            "const c = document.getElementById('waterfall');"
            "return [marks, marks.map((m) => [f.wfRow(m.row), f.wfRow(m.row - 1)]),"
            " Array.from(c.getContext('2d').getImageData(c.width / 3 | 0, m.y, 1, 1).data)];")
        events = driver.execute_script("return window.fftd.alertEvents;")
        kinds = [(e["event"], e["alert"]) for e in events]
        assert kinds == [("start", "hum"), ("end", "hum")], kinds
        start = next(m for m in marks if m["event"] == "start")
        end = next(m for m in marks if m["event"] == "end")
        hop = FRAME / RATE
        assert abs(start["time_s"] - 2.0) <= hop, start
        assert abs(end["time_s"] - 3.0) <= hop, end
        # each mark at the row holding its time: the row's time at or before the event's, the
        # newer row above it after it; the end's row above (newer than) the start's
        for m, (row, newer) in zip(marks, rows):
            assert row["time"] <= m["time_s"] and (newer is None or newer["time"] > m["time_s"]), \
                (m, row["time"], newer and newer["time"])
        assert end["row"] < start["row"], (start, end)
        assert pixel[:3] == [0xff, 0x2d, 0x55], f"mark colour at row {start['y']}: {pixel}"
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        driver.save_screenshot(os.path.join(args.out, "alert_marks.png"))
        print(f"marks {marks}; start pixel {pixel}; waterfall plot "
              f"{driver.execute_script('return window.fftd.plot.waterfall;')}")
    finally:
        if driver:
            driver.quit()
        for w in writer:
            w.close()
        fftd.terminate()
        fftd.wait()
        shutil.rmtree(tmp, ignore_errors=True)


SIGNAL_S = 4.0   # of the alert test's signal: silence, the burst from 2.0 s to 3.0 s, silence


def burst_signal(first, end):
    """Samples first..end of the alert test's signal (f32): a 1000 Hz burst from 2.0 s to 3.0 s."""
    out = []
    for i in range(first, end):
        t = i / RATE
        out.append(math.sin(2 * math.pi * 1000 * t) if 2.0 <= t < 3.0 else 0.0)
    return struct.pack(f"<{len(out)}f", *out)

if __name__ == "__main__":
    main()
