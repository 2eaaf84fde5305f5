#!/usr/bin/env python3
"""Runs the TypeScript client's browser suite (test/browser-suite.ts) in headless Chromium.

Debian's chromium and chromium-driver, driven by selenium from PyPI; a real `deltasnap serve` on
one loopback origin and the page on another (so the API's CORS answers are what the browser
uses). Prints one line per scenario; exits non-zero when one fails or the browser's console
shows an error.
  python3 clients/typescript/test/browser.py [path/to/deltasnap]
"""
import atexit
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

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


def wait_for(condition, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    return None


def demo(driver, page_origin, api):
    """The demo page lists the demo widgets at once, shows a write through the API live, and
    pushes a write made in its form. Returns the number of failures."""
    started = time.time()
    driver.get("%s/clients/typescript/demo/?api=%s/api&key=%s" % (page_origin, api, CLIENT_KEY))
    # Read in one script: the table is rendered again whenever the live query changes.
    ids = lambda: driver.execute_script("return [...document.querySelectorAll('#widgets tr')].map((row) => row.dataset.id)")
    problems = []
    if not wait_for(lambda: len(ids()) == 6, 20):
        problems.append("the six demo widgets did not show (rows: %s)" % ids())
    # Synced once (the updates loop holds its HEAD ?wait= from then on).
    wait_for(lambda: "synced" in driver.execute_script("return document.getElementById('status').textContent"), 20)
    time.sleep(0.5)
    request = urllib.request.Request("%s/api/widgets/w-live" % api, method="PUT", data=json.dumps(
        {"id": "w-live", "name": "Arrived live", "color": "black", "price": 1}).encode(),
        headers={"Authorization": "Bearer " + SECRET, "Content-Type": "application/json"})
    written = time.time()
    urllib.request.urlopen(request).read()
    if not wait_for(lambda: "w-live" in ids(), 10):
        problems.append("a write through the API did not show live (rows: %s; status: %s)" % (ids(), driver.execute_script("return document.getElementById('status').textContent")))
    live_ms = (time.time() - written) * 1000
    driver.find_element(By.NAME, "name").send_keys("Made in the page")
    driver.find_element(By.NAME, "price").send_keys("3.5")
    driver.find_element(By.CSS_SELECTOR, "#add button").click()

    def pushed():
        with urllib.request.urlopen("%s/api/widgets" % api) as answer:
            return [w for w in json.load(answer)["widgets"] if w.get("name") == "Made in the page"]
    if not wait_for(pushed, 15):
        problems.append("the page's offline write did not reach the server")
    for entry in driver.get_log("browser"):
        if entry["level"] == "SEVERE" and entry.get("source") != "network":
            problems.append("the browser's console: %s" % entry["message"])
    name = "the demo page lists the demo widgets, shows a write through the API live (%d ms), pushes its form's write" % live_ms
    print("%s - %s (%d ms)" % ("not ok" if problems else "ok", name, (time.time() - started) * 1000))
    for problem in problems:
        print("    " + problem)
    return 1 if problems else 0


def crash(driver, page_origin, api, seed):
    """Reloads the crash page at random moments of large syncs (a 3,000-record change lands on the
    server before each); each load checks what the interrupted one left. Returns the failures."""
    import random
    rng = random.Random(seed)
    started = time.time()
    problems = []
    for round in range(8):
        batch = [{"id": "c%06d" % rng.randrange(20000), "n": round, "text": "round %d" % round, "hidden": rng.random() < 0.1} for _ in range(3000)]
        unique = list({record["id"]: record for record in batch}.values())
        request = urllib.request.Request("%s/api/items" % api, method="POST", data=json.dumps(unique).encode(),
                                         headers={"Authorization": "Bearer " + SECRET, "Content-Type": "application/json"})
        urllib.request.urlopen(request).read()
        driver.get("%s/clients/typescript/test/crash.html?api=%s" % (page_origin, api))
        check = wait_for(lambda: driver.execute_script("return window.__check || null"), 60)
        if not check or not check["ok"]:
            problems.append("round %d (seed %d): %s" % (round, seed, check))
            break
        time.sleep(rng.uniform(0.05, 1.2))
    name = "IndexedDB: reloads at random moments of large syncs leave each group before or after (seed %d)" % seed
    print("%s - %s (%d ms)" % ("not ok" if problems else "ok", name, (time.time() - started) * 1000))
    for problem in problems:
        print("    " + problem)
    return 1 if problems else 0


SERVERS = []


def start(command, env):
    """Starts a `deltasnap serve`, stopped when this script ends however it ends; its URL."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    SERVERS.append(process)
    line = process.stdout.readline()
    match = re.search(r"on (http://[0-9.]+:[0-9]+)", line)
    if not match:
        raise RuntimeError("deltasnap serve did not start: %r" % line)
    return match.group(1)


@atexit.register
def stop_servers():
    for process in SERVERS:
        if process.poll() is None:
            process.terminate()
            process.wait()


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
    api = start([deltasnap, "serve", "--db", db, "--port", "0", "--client-writable", "widgets", "--allow-origin", page_origin], env)

    # The demo's server, as Scripts/serve-demo.sh makes it: the demo widgets under the demo
    # database's fixed identity, so that the committed Snapshots/demo.snapshot is current.
    demo_db = os.path.join(fixture, "demo.sqlite")
    with open(os.path.join(ROOT, "Scripts/demo/database-id")) as f:
        database_id = f.read().strip()
    subprocess.check_call([deltasnap, "import", "--db", demo_db, "--collection", "widgets", "--database-id", database_id,
                           os.path.join(ROOT, "Scripts/demo/widgets.json")], stdout=subprocess.DEVNULL)
    demo_api = start([deltasnap, "serve", "--db", demo_db, "--port", "0", "--client-writable", "widgets", "--allow-origin", page_origin], env)

    # The users' server: rules, HS256 tokens from `deltasnap token`.
    users_db = os.path.join(fixture, "users.sqlite")
    jwt_secret = "a-development-secret-of-32-bytes-at-least"
    with open(os.path.join(fixture, "rules.json"), "w") as f:
        json.dump({"collections": {"widgets": {"read": True}, "notes": {
            "read": {"owner": {"eq": {"$claim": "sub"}}}, "write": {"owner": {"eq": {"$claim": "sub"}}}, "stamp": {"owner": {"$claim": "sub"}}}}}, f)
    with open(os.path.join(fixture, "notes.json"), "w") as f:
        json.dump([{"id": "n-ada", "owner": "ada"}, {"id": "n-bob", "owner": "bob"}], f)
    with open(os.path.join(fixture, "public.json"), "w") as f:
        json.dump([{"id": "w1"}], f)
    subprocess.check_call([deltasnap, "import", "--db", users_db, "--collection", "notes", os.path.join(fixture, "notes.json")], stdout=subprocess.DEVNULL)
    subprocess.check_call([deltasnap, "import", "--db", users_db, "--collection", "widgets", os.path.join(fixture, "public.json")], stdout=subprocess.DEVNULL)
    subprocess.check_call([deltasnap, "rules", "install", "--db", users_db, os.path.join(fixture, "rules.json")], stdout=subprocess.DEVNULL)
    subprocess.check_call([deltasnap, "bake", "--db", users_db, "--collection", "notes", "--collection", "widgets", "--as-claims", '{"sub":"nobody"}',
                           "--out", os.path.join(fixture, "users.snapshot")], stdout=subprocess.DEVNULL)
    users_api = start([deltasnap, "serve", "--db", users_db, "--port", "0", "--rules", os.path.join(fixture, "rules.json"), "--jwt-secret", jwt_secret,
                       "--allow-origin", page_origin], env)
    tokens = {sub: subprocess.check_output([deltasnap, "token", "--secret", jwt_secret, "--sub", sub], text=True).strip() for sub in ["ada", "bob"]}

    # The crash page's server: 20,000 records, changed 3,000 at a time.
    crash_db = os.path.join(fixture, "crash.sqlite")
    with open(os.path.join(fixture, "crash.json"), "w") as f:
        json.dump([{"id": "c%06d" % i, "n": i, "text": "x" * 40} for i in range(20000)], f)
    subprocess.check_call([deltasnap, "import", "--db", crash_db, "--collection", "items", os.path.join(fixture, "crash.json")], stdout=subprocess.DEVNULL)
    subprocess.check_call([deltasnap, "bake", "--db", crash_db, "--collection", "items", "--out", os.path.join(fixture, "crash.snapshot")], stdout=subprocess.DEVNULL)
    crash_api = start([deltasnap, "serve", "--db", crash_db, "--port", "0", "--allow-origin", page_origin], env)

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    failed = 0
    try:
        driver.get("%s/clients/typescript/test/browser.html?api=%s&secret=%s&key=%s&users=%s&ada=%s&bob=%s"
                   % (page_origin, api, SECRET, CLIENT_KEY, users_api, tokens["ada"], tokens["bob"]))
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
            # An HTTP status is the protocol's (a 409 reset, a 404 for a file nobody may read), not
            # an error of the page; script errors and CSP violations are.
            if entry["level"] == "SEVERE" and entry.get("source") != "network":
                print("not ok - the browser's console: %s" % entry["message"])
                failed += 1
        failed += demo(driver, page_origin, demo_api)
        seed = int(os.environ.get("DELTASNAP_SEED", str(int(time.time()) % 1000000)))
        failed += crash(driver, page_origin, crash_api, seed)
        results = results + [None, None]
    finally:
        driver.quit()
        stop_servers()
        files.shutdown()
    print("browser.py: %d scenarios, %d failed (Chromium, page %s, API %s)" % (len(results), failed, page_origin, api))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
