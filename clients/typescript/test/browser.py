#!/usr/bin/env python3
"""Runs the TypeScript client's browser suite (test/browser-suite.ts) in headless Chromium.

Debian's chromium and chromium-driver, driven by selenium from PyPI; a real `deltasnap serve` on
one loopback origin and the page on another (so the API's CORS answers are what the browser
uses). Prints one line per scenario; exits non-zero when one fails or the browser's console
shows an error.
  python3 clients/typescript/test/browser.py [path/to/deltasnap]
"""
import functools
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SECRET = "owner-secret-123"
CLIENT_KEY = "client-key-123"


class Files(http.server.SimpleHTTPRequestHandler):
    """The repository, and the fixture directory at /fixture/."""

    fixture = ""

    def translate_path(self, path):
        if path.startswith("/fixture/"):
            return os.path.join(self.fixture, path[len("/fixture/"):].split("?")[0])
        return super().translate_path(path)

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


def main():
    deltasnap = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DELTASNAP_BIN")
    if not deltasnap:
        bin_path = subprocess.check_output(["swift", "build", "--show-bin-path"], cwd=ROOT, text=True).strip()
        deltasnap = os.path.join(bin_path, "deltasnap")
    fixture = tempfile.mkdtemp(prefix="deltasnap-browser-")
    db = os.path.join(fixture, "server.sqlite")
    records = [{"id": "w%04d" % i, "n": i, "color": "red" if i % 3 == 0 else "blue"} for i in range(12)]
    with open(os.path.join(fixture, "widgets.json"), "w") as f:
        json.dump(records, f)
    subprocess.check_call([deltasnap, "import", "--db", db, "--collection", "widgets", os.path.join(fixture, "widgets.json")], stdout=subprocess.DEVNULL)
    subprocess.check_call([deltasnap, "bake", "--db", db, "--collection", "widgets", "--out", os.path.join(fixture, "widgets.snapshot")], stdout=subprocess.DEVNULL)

    Files.fixture = fixture
    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Files, directory=ROOT))
    threading.Thread(target=files.serve_forever, daemon=True).start()
    page_origin = "http://127.0.0.1:%d" % files.server_address[1]

    env = dict(os.environ, DELTASNAP_WRITE_TOKEN=SECRET, DELTASNAP_CLIENT_KEY=CLIENT_KEY)
    server = subprocess.Popen(
        [deltasnap, "serve", "--db", db, "--port", "0", "--client-writable", "widgets", "--allow-origin", page_origin],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    line = server.stdout.readline()
    match = re.search(r"on (http://[0-9.]+:[0-9]+)", line)
    if not match:
        print("browser.py: deltasnap serve did not start: %r" % line, file=sys.stderr)
        return 1
    api = match.group(1)

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    failed = 0
    try:
        driver.get("%s/clients/typescript/test/browser.html?api=%s&secret=%s&key=%s" % (page_origin, api, SECRET, CLIENT_KEY))
        deadline = time.time() + 180
        while time.time() < deadline and not driver.execute_script("return window.__done === true"):
            time.sleep(0.2)
        results = driver.execute_script("return window.__results || []")
        done = driver.execute_script("return window.__done === true")
        for result in results:
            print("%s - %s (%d ms)" % ("ok" if result["ok"] else "not ok", result["name"], result["ms"]))
            if not result["ok"]:
                failed += 1
                print("    " + result["error"].replace("\n", "\n    "))
        if not done:
            print("not ok - the suite did not finish within 180 s")
            failed += 1
        for entry in driver.get_log("browser"):
            if entry["level"] == "SEVERE":
                print("not ok - the browser's console: %s" % entry["message"])
                failed += 1
    finally:
        driver.quit()
        server.terminate()
        server.wait()
        files.shutdown()
    print("browser.py: %d scenarios, %d failed (Chromium, page %s, API %s)" % (len(results), failed, page_origin, api))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
