#!/usr/bin/env python3
"""The operator's console (`deltasnap serve --console`) in headless Chromium.

Debian's chromium and chromium-driver, driven by selenium from PyPI, against real `deltasnap
serve` processes: signs in, compares the overview's counts with the API's, filters a collection,
opens a record's history after a user's push, checks a user's rows against the API's answer to
that user, hides a record and reads its tombstone in the API's delta, compacts, installs rules,
bakes a snapshot; then the same without a session (every page and JSON refused), a cross-site
form post and a post without the CSRF token (refused), the pages' sources (no external URL, no
inline script) and the browser's console (no CSP error). Takes screenshots of each page.

  python3 Tests/Console/console_browser.py path/to/deltasnap [--postgres URL] [--screenshots DIR]

With --postgres, the store is that PostgreSQL database (emptied first), and a second server on it
writes what the console, open on the first, must show. Prints one line per check; exits 1 when one fails.
"""
import argparse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

SECRET = "owner-secret-123"
CLIENT_KEY = "client-key-123"
JWT_SECRET = "a-development-secret-of-32-bytes-at-least"
RULES = {"collections": {
    "widgets": {"read": True},
    "notes": {"read": {"owner": {"eq": {"$claim": "sub"}}}, "write": {"owner": {"eq": {"$claim": "sub"}}}, "stamp": {"owner": {"$claim": "sub"}}},
}}
PAGES = ["overview", "collection?collection=widgets", "record?collection=widgets&id=w01", "users", "activity", "actions"]
failures = []


def check(condition, what, detail=""):
    print("%s - %s%s" % ("ok" if condition else "not ok", what, "" if condition or not detail else "\n    " + str(detail)))
    if not condition:
        failures.append(what)
    return condition


def wait_for(condition, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            value = condition()
        except Exception:  # the page is being replaced; ask again
            value = None
        if value:
            return value
        time.sleep(0.1)
    return None


def start(command, env):
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    match = re.search(r"on (http://[0-9.]+:[0-9]+)", line)
    if not match:
        process.kill()
        raise SystemExit("deltasnap serve did not start: %r" % line)
    return process, match.group(1)


def http(method, url, body=None, headers=None):
    """(status, headers, body bytes) of one request, errors included."""
    request = urllib.request.Request(url, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def api_json(url, token=SECRET):
    status, _, body = http("GET", url, headers={"Authorization": "Bearer " + token})
    assert status == 200, (url, status, body[:300])
    return json.loads(body)


def text(driver, selector):
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", selector)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("deltasnap")
    parser.add_argument("--postgres")
    parser.add_argument("--screenshots")
    args = parser.parse_args()
    deltasnap = os.path.realpath(args.deltasnap)
    fixture = tempfile.mkdtemp(prefix="deltasnap-console-")
    downloads = os.path.join(fixture, "downloads")
    os.makedirs(downloads)
    db = args.postgres or os.path.join(fixture, "server.sqlite")
    if args.postgres:
        subprocess.check_call(["psql", "-q", args.postgres, "-c", "SET client_min_messages = warning; DROP SCHEMA IF EXISTS deltasnap CASCADE"],
                              stdout=subprocess.DEVNULL)
    with open(os.path.join(fixture, "widgets.json"), "w") as f:
        json.dump([{"id": "w%02d" % i, "n": i, "color": "red" if i % 3 == 0 else "blue"} for i in range(1, 13)], f)
    with open(os.path.join(fixture, "notes.json"), "w") as f:
        json.dump([{"id": "n-ada-%d" % i, "owner": "ada", "text": "ada's %d" % i} for i in range(3)] + [{"id": "n-bob", "owner": "bob", "text": "bob's"}], f)
    rules_file = os.path.join(fixture, "rules.json")
    with open(rules_file, "w") as f:
        json.dump(RULES, f)
    for collection in ["widgets", "notes"]:
        subprocess.check_call([deltasnap, "import", "--db", db, "--collection", collection, os.path.join(fixture, collection + ".json")], stdout=subprocess.DEVNULL)
    env = dict(os.environ, DELTASNAP_WRITE_TOKEN=SECRET, DELTASNAP_CLIENT_KEY=CLIENT_KEY)
    common = ["--db", db, "--port", "0", "--rules", rules_file, "--jwt-secret", JWT_SECRET, "--client-writable", "widgets"]
    server, base = start([deltasnap, "serve", "--console"] + common, env)
    other = None
    if args.postgres:
        other, other_base = start([deltasnap, "serve"] + common, env)
    writer = other_base if other else base
    tokens = {sub: subprocess.check_output([deltasnap, "token", "--secret", JWT_SECRET, "--sub", sub], text=True).strip() for sub in ["ada", "bob"]}

    # Another site: a page that posts a form to the console (a cross-site request forgery).
    forgery = os.path.join(fixture, "forgery")
    os.makedirs(forgery)
    with open(os.path.join(forgery, "index.html"), "w") as f:
        f.write('<!doctype html><form id="f" method="post" action="%s/console/api/compact"><input name="before" value="99"></form>'
                '<script>document.getElementById("f").submit()</script>' % base)
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: Quiet(*a, directory=forgery, **k))
    threading.Thread(target=site.serve_forever, daemon=True).start()
    # "localhost" is another site than "127.0.0.1" to the browser.
    forgery_url = "http://localhost:%d/" % site.server_address[1]

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"]:
        options.add_argument(argument)
    options.add_experimental_option("prefs", {"download.default_directory": downloads, "download.prompt_for_download": False})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    try:
        run(driver, deltasnap, base, writer, tokens, downloads, forgery_url, args)
    finally:
        driver.quit()
        server.terminate()
        if other:
            other.terminate()
        site.shutdown()
    print("%d checks failed" % len(failures) if failures else "all console checks passed")
    raise SystemExit(1 if failures else 0)


def shot(driver, args, name):
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
        driver.save_screenshot(os.path.join(args.screenshots, name + ".png"))


def run(driver, deltasnap, base, writer, tokens, downloads, forgery_url, args):
    # Without a session: every page goes to the sign-in page, every JSON answer and action is 401.
    for page in PAGES:
        driver.get("%s/console/%s" % (base, page))
        check(driver.current_url.endswith("/console/sign-in"), "without a session, /console/%s goes to the sign-in page" % page, driver.current_url)
    for path in ["overview", "records?collection=widgets", "record?collection=widgets&id=w01", "activity", "rules"]:
        status, headers, body = http("GET", "%s/console/api/%s" % (base, path))
        check(status == 401 and b"console-sign-in-required" in body, "without a session, GET /console/api/%s is 401" % path, (status, body[:200]))
    for path in ["users/check", "record/hide", "record/unhide", "compact", "rules"]:
        status, _, body = http("POST", "%s/console/api/%s" % (base, path), b"{}", {"Content-Type": "application/json"})
        check(status == 401, "without a session, POST /console/api/%s is 401" % path, (status, body[:200]))
    status, _, _ = http("POST", base + "/console/snapshot", b"collection=widgets", {"Content-Type": "application/x-www-form-urlencoded"})
    check(status == 401, "without a session, POST /console/snapshot is 401", status)

    # Sign in: a wrong secret is refused as the API refuses it; the right one opens the overview.
    driver.get(base + "/console/sign-in")
    shot(driver, args, "sign-in")
    driver.find_element(By.ID, "secret").send_keys("not-the-secret")
    driver.find_element(By.CSS_SELECTOR, "form button").click()
    check(wait_for(lambda: "wrong" in (text(driver, ".error") or "")), "a wrong secret is refused on the page")
    driver.find_element(By.ID, "secret").send_keys(SECRET)
    driver.find_element(By.CSS_SELECTOR, "form button").click()
    check(wait_for(lambda: driver.current_url.endswith("/console/overview")), "the right secret opens the overview", driver.current_url)
    cookie = driver.get_cookie("deltasnap-console")
    check(cookie is not None and cookie.get("httpOnly") and cookie.get("sameSite") == "Strict", "the session cookie is HttpOnly and SameSite=Strict", cookie)
    session = "deltasnap-console=" + cookie["value"]

    # A user's push, through another server on the same database when there is one.
    widgets_etag = http("GET", writer + "/api/widgets")[1]["ETag"]
    push = {"client": "phone-of-ada", "mutations": [{"id": 1, "collection": "notes", "op": "put", "record": {"id": "n-ada-new", "owner": "ada", "text": "from the phone"},
                                                      "base": None, "create": True}]}
    status, _, body = http("POST", writer + "/push", json.dumps(push).encode(), {"Authorization": "Bearer " + tokens["ada"], "Content-Type": "application/json"})
    check(status == 200 and b'"applied"' in body, "ada's push is applied", (status, body[:300]))
    denied = {"client": "phone-of-bob", "mutations": [{"id": 1, "collection": "notes", "op": "put", "record": {"id": "n-ada-0", "owner": "bob", "text": "mine now"}, "base": None}]}
    http("POST", base + "/push", json.dumps(denied).encode(), {"Authorization": "Bearer " + tokens["bob"], "Content-Type": "application/json"})

    # The overview's counts equal the API's.
    driver.get(base + "/console/overview")
    check(wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#collections tr[data-collection]")), "the overview lists the collections")
    for collection in ["widgets", "notes"]:
        records = api_json("%s/api/%s" % (base, collection))[collection]
        shown = text(driver, '#collections tr[data-collection="%s"] .visible' % collection)
        check(shown == str(len(records)), "the overview's %s count equals the API's (%d)" % (collection, len(records)), shown)
    check((text(driver, "#position") or "").replace(",", "") == str(api_json(base + "/healthz")["position"]), "the overview's position is the database's",
          text(driver, "#position"))
    shot(driver, args, "overview")

    # A collection, filtered as ?filter= filters.
    flt = '{"color":{"eq":"red"}}'
    driver.get("%s/console/collection?collection=widgets" % base)
    wait_for(lambda: driver.find_elements(By.ID, "filter"))
    driver.find_element(By.ID, "filter").send_keys(flt)
    driver.find_element(By.CSS_SELECTOR, "form.search button").click()
    wait_for(lambda: "filter=" in driver.current_url and driver.find_elements(By.ID, "examined"))
    expected = sorted(r["id"] for r in api_json("%s/api/widgets?filter=%s" % (base, urllib.parse.quote(flt)))["widgets"])
    shown = wait_for(lambda: driver.execute_script("return [...document.querySelectorAll('#records tr[data-id]')].map(r => r.dataset.id)"))
    check(sorted(shown or []) == expected, "a filtered collection shows what the API's ?filter= answers", (shown, expected))
    shot(driver, args, "collection")

    # A record's history after the push: the user and the client.
    driver.get("%s/console/record?collection=notes&id=n-ada-new" % base)
    check(wait_for(lambda: text(driver, "#history td.user") == "ada" and text(driver, "#history td.client") == "phone-of-ada"),
          "the record's history names the pushing user and client", (text(driver, "#history td.user"), text(driver, "#history td.client")))
    shot(driver, args, "record")

    # A user's rows, as the API answers that user, and why for one record.
    driver.get(base + "/console/users")
    wait_for(lambda: driver.find_elements(By.ID, "claims"))
    driver.find_element(By.ID, "claims").send_keys('{"sub":"ada"}')
    driver.find_element(By.ID, "explain-collection").send_keys("notes")
    driver.find_element(By.ID, "explain-id").send_keys("n-bob")
    driver.find_element(By.ID, "check-user").click()
    wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, '#user-collections tr[data-collection="notes"] td.rows a'))
    shown = driver.execute_script("return [...document.querySelectorAll('#user-collections tr[data-collection=\"notes\"] td.rows a')].map(a => a.textContent)")
    expected = sorted(r["id"] for r in api_json(base + "/api/notes", tokens["ada"])["notes"])
    check(sorted(shown) == expected, "the Users page shows the rows the API gives ada", (shown, expected))
    read_line = text(driver, '#explanation li[data-operation="read"]') or ""
    check("denied" in read_line, "the Users page explains why ada may not read bob's note", read_line)
    shot(driver, args, "users")

    # Activity: the push, and bob's denied one.
    driver.get(base + "/console/activity?user=ada")
    check(wait_for(lambda: "n-ada-new" in (text(driver, "#applied") or "")), "the activity page lists ada's applied push")
    driver.get(base + "/console/activity?outcome=denied")
    check(wait_for(lambda: "phone-of-bob" in (text(driver, "#refused") or "")), "the activity page lists bob's denied push")
    driver.get(base + "/console/activity")
    wait_for(lambda: driver.find_elements(By.ID, "applied"))
    check("n-ada-new" in (text(driver, "#changes") or ""), "the activity page lists the records changed last")
    shot(driver, args, "activity")

    # Hide a record: the API's delta from the token before carries its tombstone.
    driver.get("%s/console/record?collection=widgets&id=w05" % base)
    wait_for(lambda: driver.find_elements(By.ID, "hide"))
    driver.find_element(By.ID, "hide").click()
    driver.find_element(By.CSS_SELECTOR, "[data-confirm]").click()
    check(wait_for(lambda: (text(driver, "#state") or "").startswith("hidden")), "hiding a record shows it hidden")
    status, _, body = http("GET", base + "/api/widgets", headers={"If-None-Match": widgets_etag})
    delta = json.loads(body) if status == 200 else {}
    tombstones = [r for r in delta.get("widgets", []) if r.get("hidden")]
    check(status == 200 and [r["id"] for r in tombstones] == ["w05"], "the API's delta carries the hidden record's tombstone", (status, body[:300]))
    driver.find_element(By.ID, "unhide").click()
    driver.find_element(By.CSS_SELECTOR, "[data-confirm]").click()
    check(wait_for(lambda: text(driver, "#state") == "visible"), "bringing it back shows it visible")

    # Compact: previewed first, then done.
    driver.get(base + "/console/actions")
    wait_for(lambda: driver.find_elements(By.ID, "before-position"))
    head = api_json(base + "/healthz")["position"]
    driver.find_element(By.ID, "before-position").send_keys(str(head))
    driver.find_element(By.ID, "compact-preview").click()
    check(wait_for(lambda: "Would move" in (text(driver, "#compact-report") or "")), "the compaction preview says what it would drop", text(driver, "#compact-report"))
    shot(driver, args, "actions")
    driver.find_element(By.ID, "compact").click()
    driver.find_element(By.CSS_SELECTOR, "#compact-report [data-confirm]").click()
    check(wait_for(lambda: "Compacted" in (text(driver, "#compact-report") or "")), "compaction runs after its confirmation", text(driver, "#compact-report"))
    status, _, body = http("GET", base + "/api/widgets", headers={"If-None-Match": widgets_etag})
    check(status == 409 and b"expired" in body, "a token from before the horizon is now expired", (status, body[:200]))

    # Rules: an error at its JSON Pointer, then an install.
    rules = driver.find_element(By.ID, "rules-file")
    rules.send_keys('{"collections": {"notes": {"read": {"owner": {"eq": {"$claim": 5}}}}}}')
    driver.find_element(By.ID, "rules-check").click()
    check(wait_for(lambda: (text(driver, "#rules-error") or "").find("/collections/notes") >= 0), "a bad rules file is refused at its JSON Pointer", text(driver, "#rules-error"))
    rules.clear()
    changed = json.loads(json.dumps(RULES))
    changed["collections"]["gadgets"] = {"read": True}
    rules.send_keys(json.dumps(changed))
    driver.find_element(By.ID, "rules-check").click()
    wait_for(lambda: driver.find_elements(By.ID, "rules-install"))
    driver.find_element(By.ID, "rules-install").click()
    driver.find_element(By.CSS_SELECTOR, "#rules-outcome [data-confirm]").click()
    check(wait_for(lambda: "Installed as version 2" in (text(driver, "#rules-installed") or "")), "new rules are installed", text(driver, "#rules-outcome"))

    # A snapshot of a public collection, downloaded and verified.
    driver.get("%s/console/collection?collection=widgets" % base)
    wait_for(lambda: driver.find_elements(By.ID, "bake"))
    driver.find_element(By.ID, "bake").click()
    path = os.path.join(downloads, "widgets.deltasnap")
    check(wait_for(lambda: os.path.exists(path) and not os.path.exists(path + ".crdownload") and os.path.getsize(path) > 0, 20), "the snapshot downloads")
    if os.path.exists(path):
        verified = subprocess.run([deltasnap, "verify", path], capture_output=True, text=True)
        check(verified.returncode == 0, "the downloaded snapshot verifies", verified.stdout + verified.stderr)

    # With a session: a post without the CSRF token is refused; a cross-site form post is refused.
    status, _, body = http("POST", base + "/console/api/compact", b'{"before": 1}', {"Content-Type": "application/json", "Cookie": session})
    check(status == 403 and b"console-csrf" in body, "a post without the CSRF token is refused", (status, body[:200]))
    status, _, body = http("POST", base + "/console/api/compact", b'{"before": 1}',
                           {"Content-Type": "application/json", "Cookie": session, "X-CSRF-Token": "a-guess"})
    check(status == 403 and b"console-csrf" in body, "a post with a wrong CSRF token is refused", (status, body[:200]))
    horizon = api_json(base + "/healthz")
    driver.get(forgery_url)
    time.sleep(1.5)
    forged = driver.find_element(By.TAG_NAME, "body").text
    check("console-sign-in-required" in forged or "console-cross-site" in forged or "console-csrf" in forged,
          "a cross-site form post is refused", forged[:300])
    check(api_json(base + "/healthz") == horizon, "the cross-site post changed nothing")

    # The pages' sources: no external URL, no inline script; the browser's console: no CSP error.
    for page in PAGES:
        driver.get("%s/console/%s" % (base, page))
        wait_for(lambda: not driver.find_elements(By.CSS_SELECTOR, "#main > p.quiet:only-child"), 5)
        source = driver.execute_script("return document.documentElement.outerHTML")
        inline = driver.execute_script("return [...document.scripts].filter(s => !s.src).length")
        external = [url for url in re.findall(r'(?:src|href)="(https?://[^"]*)"', source) if not url.startswith(base)]
        check(inline == 0 and not external, "/console/%s has no inline script and no external URL" % page, (inline, external))
    for asset in ["console.js", "console.css"]:
        body = http("GET", "%s/console/%s" % (base, asset))[2].decode()
        check(not re.search(r"https?://", body), "/console/%s names no external URL" % asset)
    body = http("GET", base + "/console/icon.svg")[2].decode()
    check(re.findall(r"https?://[^\"]*", body) == ["http://www.w3.org/2000/svg"], "/console/icon.svg names no URL but its namespace")
    problems = [entry["message"] for entry in driver.get_log("browser")
                if entry["level"] == "SEVERE" and ("Content Security Policy" in entry["message"] or entry.get("source") != "network")]
    check(not problems, "the browser's console shows no CSP or script error", problems)

    # Sign out: the session ends.
    driver.get(base + "/console/overview")
    wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "header form button"))
    driver.find_element(By.CSS_SELECTOR, "header form button").click()
    check(wait_for(lambda: driver.current_url.endswith("/console/sign-in")), "signing out goes to the sign-in page")
    status, _, _ = http("GET", base + "/console/api/overview", headers={"Cookie": session})
    check(status == 401, "the ended session's cookie is refused", status)


if __name__ == "__main__":
    main()
