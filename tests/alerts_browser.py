#!/usr/bin/env python3
"""Alert and gap marks on the live page's waterfall (issue 27), in headless chromium through
chromedriver and selenium; run by tests/alerts_browser.rs.

    alerts_browser.py --fftd PATH --out DIR

Alerts: serves a 6 s recording (8 kHz; a 1000 Hz burst from 2.0 s to 3.0 s) with
`fftd --realtime --serve --alert name=hum,band=900-1100,above=-20`, opens the page and checks:
no console errors; the page received the start and end events from /events; each is marked on
the waterfall at the row holding its time (the row's time within one frame of the event's), the
start in the mark colour (the canvas pixels at the mark's row); a screenshot goes to DIR.

Gaps: `fftd --file FIFO --retry forever --serve` (no --alert, no --events) fed by a writer that
goes and a second that comes 1 s later; checks that the page received the `gap` event from
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
    return webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))


def wait_for(driver, js, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = driver.execute_script(f"return {js};")
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


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
    opener = threading.Thread(target=lambda: writer.append(open(fifo, "wb")))
    opener.start()   # fftd's open of the FIFO waits for it
    try:
        addr = live_view_address(fftd)
        driver = browser(os.path.join(tmp, "profile"))
        driver.get(f"http://{addr}/")
        wait_for(driver, "window.fftd && window.fftd.eventsOpen", 30, "/events connected")
        opener.join(10)
        assert writer, "fftd did not open the FIFO"
        with writer[0] as w:   # the first writer: 1 s of tone, then gone
            w.write(tone)
        wait_for(driver, "window.fftd.wfRows > 0", 30, "the first writer's rows")
        time.sleep(1.0)
        with open(fifo, "wb") as w:   # the second writer
            w.write(tone)
        marks = wait_for(
            driver,
            "window.fftd && window.fftd.alertMarks.some((m) => m.event === 'gap')"
            " && window.fftd.alertMarks", 30, "a gap mark")
        events = driver.execute_script("return window.fftd.alertEvents;")
        assert [e["event"] for e in events] == ["gap"], events
        gap = events[0]
        assert gap["resumed"] is True and gap["stream"] == 0 and gap["gap_s"] >= 0.9, gap
        # the mark, its row and the row above it, and the mark's pixels, read in one script
        mark, rows, pixels = driver.execute_script(
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
    signal_path = os.path.join(tmp, "burst.f32")
    with open(signal_path, "wb") as f:
        for i in range(RATE * 6):
            t = i / RATE
            v = math.sin(2 * math.pi * 1000 * t) if 2.0 <= t < 3.0 else 0.0
            f.write(struct.pack("<f", v))
    fftd = subprocess.Popen(
        [args.fftd, "--file", signal_path, "--rate", str(RATE), "--frame", str(FRAME),
         "--realtime", "--serve", "127.0.0.1:0", "--device", "cpu", "--quiet",
         "--output", "/dev/null", "--alert", "name=hum,band=900-1100,above=-20"],
        stderr=subprocess.PIPE, text=True)
    driver = None
    try:
        addr = live_view_address(fftd)
        driver = browser(os.path.join(tmp, "profile"))
        driver.get(f"http://{addr}/")
        marks = wait_for(
            driver,
            "window.fftd && window.fftd.alertMarks.length >= 2 && window.fftd.alertMarks",
            30, "a start and an end mark")
        events = driver.execute_script("return window.fftd.alertEvents;")
        kinds = [(e["event"], e["alert"]) for e in events]
        assert kinds == [("start", "hum"), ("end", "hum")], kinds
        start = next(m for m in marks if m["event"] == "start")
        end = next(m for m in marks if m["event"] == "end")
        hop = FRAME / RATE
        assert abs(start["time_s"] - 2.0) <= hop, start
        assert abs(end["time_s"] - 3.0) <= hop, end
        # the start's row is newer-or-equal in time to the event, within a frame; the end's row
        # above (newer than) the start's
        assert end["row"] < start["row"], (start, end)
        # the mark and its pixel read in one script: no redraw (a newer row moves the mark) between
        shown, pixel = driver.execute_script(
            "const m = window.fftd.alertMarks.find((m) => m.event === 'start');"
            "const c = document.getElementById('waterfall');"
            "return [m, Array.from(c.getContext('2d').getImageData(c.width / 3 | 0, m.y, 1, 1).data)];")
        assert pixel[:3] == [0xff, 0x2d, 0x55], f"mark colour at row {shown['y']}: {pixel}"
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        driver.save_screenshot(os.path.join(args.out, "alert_marks.png"))
        print(f"marks {marks}; start pixel {pixel}")
    finally:
        if driver:
            driver.quit()
        fftd.terminate()
        fftd.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
