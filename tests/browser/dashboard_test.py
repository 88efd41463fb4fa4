#!/usr/bin/env python3
"""The dashboard as a person sees it: headless Chromium (Debian's chromium + chromium-driver,
driven by python3-selenium) against a real parityd on loopback holding the bundled sample (a
clean build and a build with a defect), a generated statistics job of 100,000 results with an
operator named as HTML, and a job whose upload runs while its page is open. Each check saves a
screenshot in BUILD/tests/browser/.

    dashboard_test.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

SRC, BUILD = sys.argv[1], sys.argv[2]
PARITYD = os.path.join(BUILD, "server", "parityd")
AGENT = os.path.join(BUILD, "client", "parity-agent")
SAMPLE = os.path.join(SRC, "tests", "data", "sample")
SHOTS = os.path.join(BUILD, "tests", "browser")
HOSTILE = "<img src=x onerror=alert(1)>.0.forward"
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)), flush=True)
    if not ok:
        failures.append(name)


def agent(*args):
    r = subprocess.run([AGENT, *args, "--retry-seconds", "20"], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError("parity-agent %s: %s %s" % (args, r.stdout, r.stderr))
    return r


class Daemon:
    def __init__(self, work):
        self.work = work
        self.log = open(os.path.join(work, "parityd.log"), "w")
        self.proc = subprocess.Popen(
            [PARITYD, "--data-dir", os.path.join(work, "data"), "--listen", "127.0.0.1:0",
             "--port-file", os.path.join(work, "port"), "--http-listen", "127.0.0.1:0",
             "--http-port-file", os.path.join(work, "http_port")], stderr=self.log)
        for _ in range(200):
            if os.path.exists(os.path.join(work, "http_port")) and os.path.exists(os.path.join(work, "port")):
                break
            time.sleep(0.05)
        self.grpc = "127.0.0.1:" + open(os.path.join(work, "port")).read().strip()
        self.http = "http://127.0.0.1:" + open(os.path.join(work, "http_port")).read().strip()

    def get(self, path):
        with urllib.request.urlopen(self.http + path) as r:
            return json.load(r)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def newest_job(d, project):
    return d.get("/api/v1/projects/%s/jobs?page_size=1" % project)["jobs"][0]["jobId"]


def prepare(d, work):
    """Uploads the sample (clean and defective builds) and the 100k-result statistics job."""
    agent("upload", SAMPLE + "/golden", "--server", d.grpc, "--project", "sample", "--role", "golden",
          "--run-name", "golden", "--run-id-file", os.path.join(work, "g"))
    golden = open(os.path.join(work, "g")).read().split()[0]
    agent("upload", SAMPLE + "/golden", "--server", d.grpc, "--project", "sample", "--role", "target",
          "--run-name", "clean build", "--against", golden)
    clean = newest_job(d, "sample")
    agent("upload", SAMPLE + "/target", "--server", d.grpc, "--project", "sample", "--role", "target",
          "--run-name", "build with a defect", "--against", golden)
    bad = newest_job(d, "sample")
    # The defective build again, carrying msprobe's stack.json (with markup in it: shown as text)
    # and construct.json.
    st = os.path.join(work, "stack")
    shutil.copytree(SAMPLE + "/target", st)
    with open(os.path.join(st, "stack.json"), "w") as f:
        json.dump({"0": [["Functional.linear.1.forward"],
                         "File train.py, line 12, in forward, \n self.fc2(x) <img src=x onerror=alert(1)> \n"]}, f)
    with open(os.path.join(st, "construct.json"), "w") as f:
        json.dump({"Module.mlp.MLP.forward.0": None, "Functional.linear.1.forward": "Module.mlp.MLP.forward.0",
                   "Functional.layer_norm.0.forward": None}, f)
    agent("upload", st, "--server", d.grpc, "--project", "sample", "--role", "target",
          "--run-name", "build with a defect and stacks", "--against", golden)
    stacked = newest_job(d, "sample")
    big = os.path.join(work, "big")
    subprocess.run([sys.executable, os.path.join(SRC, "tests", "data", "make_stats_dump.py"), big, "50000",
                    "--hostile"], check=True)
    t0 = time.time()
    agent("upload-pair", big + "/golden", big + "/target", "--server", d.grpc, "--project", "big")
    print("uploaded the 100k-result pair in %.1f s" % (time.time() - t0), flush=True)
    return clean, bad, stacked, newest_job(d, "big")


def browser():
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1500"):
        o.add_argument(a)
    o.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    service = ChromeService(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    return webdriver.Chrome(options=o, service=service)


def load(b, url):
    b.get(url)
    wait_ready(b)


def wait_ready(b, timeout=30):
    WebDriverWait(b, timeout).until(lambda x: x.execute_script("return document.body.dataset.ready") == "1")


def shot(b, name):
    os.makedirs(SHOTS, exist_ok=True)
    b.save_screenshot(os.path.join(SHOTS, name + ".png"))


def text(b, css):
    return b.find_element(By.CSS_SELECTOR, css).text


def canvas_pixels(b):
    return b.execute_script("""
        const c = document.getElementById('plot'); if (!c) return 0;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++; return n;""")


def test_job_page(b, d, bad):
    load(b, d.http + "/jobs/" + bad)
    culprits = text(b, "#culprits")
    check("job page names the culprit", "Functional.linear.1.forward" in culprits, culprits)
    check("job page lists its propagated operators",
          "Functional.layer_norm.0.forward" in culprits and "Functional.softmax.0.forward" in culprits, culprits)
    check("the plot is drawn", canvas_pixels(b) > 1000, canvas_pixels(b))
    check("the plot marks the culprit", b.execute_script(
        "const c = Chart.getChart('plot'); return c.data.datasets.some(s => s.label.endsWith('culprits') && s.data.length === 1);"))
    shot(b, "job")


def test_stack_and_tree(b, d, stacked):
    load(b, d.http + "/jobs/" + stacked)
    culprits = text(b, "#culprits")
    check("the culprit's figures: phase and error growth", "(forward, growth " in culprits, culprits)
    check("its stack, markup shown as text", "self.fc2(x) <img src=x onerror=alert(1)>" in text(b, "#culprits pre.stack"),
          text(b, "#culprits pre.stack"))
    check("no element came from the stack", not b.find_elements(By.CSS_SELECTOR, "#culprits img"))
    check("the noise floor", "Noise floor: growth" in text(b, "#noise-floor"), text(b, "#noise-floor"))
    b.find_element(By.CSS_SELECTOR, "#tree-box summary").click()
    tree = text(b, "#module-tree")
    check("the module tree marks the culprit under its module",
          "Module.mlp.MLP.forward.0\nFunctional.linear.1.forward <--- *** HERE ***" in tree.replace("  ", " "), tree)
    shot(b, "job-tree")


def test_filter_sort_detail(b, d, bad):
    load(b, d.http + "/jobs/" + bad)
    b.find_element(By.CSS_SELECTOR, "button[data-verdict=FAIL]").click()
    wait_ready(b)
    rows = b.find_elements(By.CSS_SELECTOR, "#results tbody tr")
    check("the verdict filter puts itself in the URL", "verdict=FAIL" in b.current_url, b.current_url)
    check("the verdict filter leaves the 5 failing rows", len(rows) == 5 and all("FAIL" in r.text for r in rows),
          [r.text for r in rows])
    Select(b.find_element(By.ID, "sort")).select_by_value("Cosine")
    wait_ready(b)
    check("a sort change puts itself in the URL", "sort=Cosine" in b.current_url, b.current_url)
    first = b.find_elements(By.CSS_SELECTOR, "#results tbody tr")[0].get_attribute("data-name")
    check("sorted by Cosine, the lowest first", first == "Functional.layer_norm.0.forward.input.0" or
          first.startswith("Functional.softmax") or first.startswith("Functional.layer_norm"), first)
    b.find_elements(By.CSS_SELECTOR, "#results tbody tr")[0].click()
    wait_ready(b)
    check("a row opens the operator", text(b, "#detail h2") == first and "op=" in b.current_url, b.current_url)
    check("the operator shows each metric with its threshold", "≥ 0.99" in text(b, "#detail-metrics"),
          text(b, "#detail-metrics"))
    shot(b, "detail")
    # The URL alone brings the same view back.
    url = b.current_url
    load(b, url)
    check("a pasted link shows the same filtered, sorted page", len(b.find_elements(By.CSS_SELECTOR, "#results tbody tr")) == 5
          and text(b, "#detail h2") == first)


def test_diff(b, d, clean, bad):
    load(b, "%s/jobs/%s/diff/%s" % (d.http, clean, bad))
    regs = text(b, "#regressions")
    check("the diff page shows the regressions", "verdict PASS -> FAIL" in regs and "Functional.linear.1.forward.output.0" in regs, regs)
    check("the diff page plots both jobs", b.execute_script("return Chart.getChart('plot').data.datasets.filter(s => s.label.endsWith(' max')).length") == 2)
    shot(b, "diff")
    load(b, "%s/jobs/%s/diff/%s" % (d.http, bad, clean))
    fixes = text(b, "#fixes")
    check("the reverse diff shows them as fixes", "verdict FAIL -> PASS" in fixes, fixes)


def test_hostile_name(b, d, big):
    load(b, d.http + "/jobs/" + big + "?q=*img*")
    names = [r.get_attribute("data-name") for r in b.find_elements(By.CSS_SELECTOR, "#results tbody tr")]
    check("an operator named as HTML is found", HOSTILE + ".input.0" in names, names)
    check("and shown as text", HOSTILE + ".input.0" in text(b, "#results"), text(b, "#results"))
    check("no element is made from it", len(b.find_elements(By.CSS_SELECTOR, "#results img")) == 0)
    try:
        b.switch_to.alert
        check("no script of it runs", False, "an alert opened")
    except NoAlertPresentException:
        check("no script of it runs", True)
    shot(b, "hostile")


def test_big_job(b, d, big):
    t0 = time.time()
    load(b, d.http + "/jobs/" + big)
    ready = time.time() - t0
    timing = b.execute_script("""
        const nav = performance.getEntriesByType('navigation')[0];
        const api = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/'));
        return {load: nav.loadEventEnd, dom: nav.domContentLoadedEventEnd,
                api: api.map(e => [e.name.replace(location.origin, ''), e.duration])};""")
    print("100k-result job page: load event %.0f ms, data drawn after %.0f ms (wall)" % (timing["load"], ready * 1000))
    for name, ms in timing["api"]:
        print("  %6.0f ms  %s" % (ms, name))
    check("the 100k-result job's total is shown", "100002 results" in text(b, "#page-info"), text(b, "#page-info"))
    check("its plot is downsampled, not shipped whole", b.execute_script(
        "return Chart.getChart('plot').data.datasets[0].data.length") <= 600)
    b.find_element(By.XPATH, "//button[contains(., 'Next')]").click()
    wait_ready(b)
    check("paging moves through it", "page=1" in b.current_url and "page 2 of" in text(b, "#page-info"), text(b, "#page-info"))
    shot(b, "big")


def test_openapi(d, clean, bad, big):
    """Every GET route's answer validates against its schema in the served OpenAPI description."""
    from jsonschema import Draft202012Validator
    doc = d.get("/api/v1/openapi.json")
    calls = {
        "/api/v1/status": "/api/v1/status",
        "/api/v1/projects/{project}/runs": "/api/v1/projects/sample/runs",
        "/api/v1/jobs": "/api/v1/jobs?page_size=2",
        "/api/v1/jobs/{job_id}": "/api/v1/jobs/" + bad,
        "/api/v1/jobs/{job_id}/summary": "/api/v1/jobs/%s/summary" % bad,
        "/api/v1/jobs/{job_id}/results": "/api/v1/jobs/%s/results?verdicts=FAIL" % bad,
        "/api/v1/jobs/{job_id}/results/{name}": "/api/v1/jobs/%s/results/Functional.linear.1.forward.output.0" % bad,
        "/api/v1/jobs/{base_job_id}/diff/{job_id}": "/api/v1/jobs/%s/diff/%s" % (clean, bad),
        "/api/v1/jobs/{job_id}/series": "/api/v1/jobs/%s/series" % big,
    }
    for template, url in calls.items():
        schema = dict(doc["paths"][template]["get"]["responses"]["200"]["content"]["application/json"]["schema"])
        schema["components"] = doc["components"]
        errors = list(Draft202012Validator(schema).iter_errors(d.get(url)))
        check("GET %s matches the OpenAPI description" % template, not errors, [e.message for e in errors[:3]])
    status = {"$ref": "#/components/schemas/Status", "components": doc["components"]}
    try:
        d.get("/api/v1/jobs/job-nope")
        check("an error matches the OpenAPI Status", False, "no error")
    except urllib.error.HTTPError as e:
        errors = list(Draft202012Validator(status).iter_errors(json.load(e)))
        check("an error matches the OpenAPI Status", e.code == 404 and not errors, errors[:3])


def write_npy_dump(dirname, count, bad=-1):
    os.makedirs(dirname, exist_ok=True)
    for i in range(count):
        v = np.sin(0.001 * (np.arange(16384) + 97 * i)).astype(np.float32)
        if i == bad:
            v[::2] = -v[::2]
        np.save(os.path.join(dirname, "t%02d.npy" % i), v)


def test_live(b, d, work):
    write_npy_dump(os.path.join(work, "lg"), 40)
    write_npy_dump(os.path.join(work, "staging"), 40, bad=7)
    live = os.path.join(work, "live")
    os.makedirs(live)
    agent("upload", os.path.join(work, "lg"), "--server", d.grpc, "--project", "live", "--role", "golden",
          "--run-id-file", os.path.join(work, "lgid"))
    golden = open(os.path.join(work, "lgid")).read().split()[0]
    result = {}
    t = threading.Thread(target=lambda: result.update(r=agent(
        "upload", live, "--follow", "--idle-timeout", "60", "--server", d.grpc, "--project", "live",
        "--role", "target", "--against", golden)))
    t.start()
    for i in range(5):  # the first files, then the page opens on the running job
        shutil.copy(os.path.join(work, "staging", "t%02d.npy" % i), live)
    job = None
    for _ in range(100):
        jobs = d.get("/api/v1/projects/live/jobs")["jobs"]
        if jobs:
            job = jobs[0]["jobId"]
            break
        time.sleep(0.1)
    load(b, d.http + "/jobs/" + job)
    first = text(b, "#counts")
    check("a running job's page says it is live", len(b.find_elements(By.ID, "live")) == 1)
    shot(b, "live-start")
    for i in range(5, 40):
        shutil.copy(os.path.join(work, "staging", "t%02d.npy" % i), live)
        time.sleep(0.1)
    open(os.path.join(live, "parity.done"), "w").close()
    t.join(120)
    # Read through a script: the page replaces its elements as it redraws.
    counts = lambda x: x.execute_script("const c = document.getElementById('counts'); return c ? c.innerText : '';")
    try:
        WebDriverWait(b, 30).until(lambda x: "All 40" in counts(x))
        updated = True
    except TimeoutException:  # the check below reports what the page shows
        updated = False
    check("the live page updated as verdicts arrived, without a reload", updated and first != counts(b),
          (first, counts(b)))
    check("and shows the failure", "FAIL 1" in counts(b), counts(b))
    shot(b, "live-end")


def main():
    work = tempfile.mkdtemp(prefix="parity-browser-")
    d = Daemon(work)
    b = None
    try:
        clean, bad, stacked, big = prepare(d, work)
        b = browser()
        test_job_page(b, d, bad)
        test_stack_and_tree(b, d, stacked)
        test_filter_sort_detail(b, d, bad)
        test_diff(b, d, clean, bad)
        test_hostile_name(b, d, big)
        test_big_job(b, d, big)
        test_openapi(d, clean, bad, big)
        test_live(b, d, work)
    finally:
        if b:
            b.quit()
        d.stop()
        if failures:
            print(open(os.path.join(work, "parityd.log")).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    print("%d failed" % len(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
