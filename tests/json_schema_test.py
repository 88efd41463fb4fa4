#!/usr/bin/env python3
"""Every --json document validates against its schema in docs/schemas/.

Starts a real parityd on loopback with a fresh data directory, uploads the bundled sample pair
with parity-agent, then runs every command that prints JSON (parity compare, runs, jobs, watch,
submit, summary, results, show, diff, export --format json, status; parity-agent upload and
upload-pair) and validates its output with python3-jsonschema (Draft 2020-12, the schemas'
$refs resolved from docs/schemas/). Also checks the vocabulary the schemas cannot: the same
pair gives the same item documents from `parity compare` and from the daemon.

usage: json_schema_test.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import jsonschema

SRC, BUILD = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
SCHEMAS = SRC / "docs" / "schemas"
SAMPLE = SRC / "tests" / "data" / "sample"
PARITY = str(BUILD / "client" / "parity")
AGENT = str(BUILD / "client" / "parity-agent")
PARITYD = str(BUILD / "server" / "parityd")

failures = []
checked = []


def schema_store():
    store = {}
    for p in SCHEMAS.glob("*.schema.json"):
        s = json.loads(p.read_text())
        store[s["$id"]] = s
    return store


STORE = schema_store()


def validate(what, doc, schema_file):
    schema = json.loads((SCHEMAS / schema_file).read_text())
    resolver = jsonschema.RefResolver(base_uri=schema["$id"], referrer=schema, store=STORE)
    validator = jsonschema.Draft202012Validator(schema, resolver=resolver)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:5]:
        failures.append(f"{what}: {'/'.join(map(str, e.path))}: {e.message[:300]}")
    checked.append(what)


def run(argv, expect_codes=(0,)):
    p = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, NO_COLOR="1"))
    if p.returncode not in expect_codes:
        failures.append(f"{' '.join(argv)}: exit {p.returncode} (wanted {expect_codes}): {p.stderr[-500:]}")
        return None
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        failures.append(f"{' '.join(argv)}: not one JSON document ({e}): {p.stdout[:300]!r}")
        return None


def check(argv, schema_file, expect_codes=(0,)):
    doc = run(argv, expect_codes)
    if doc is not None:
        validate(" ".join(pathlib.Path(argv[0]).name.split() + argv[1:2]), doc, schema_file)
    return doc


def main():
    with tempfile.TemporaryDirectory(prefix="parity_schema_") as tmp:
        tmp = pathlib.Path(tmp)
        port_file = tmp / "port"
        daemon = subprocess.Popen([PARITYD, "--data-dir", str(tmp / "data"), "--listen", "127.0.0.1:0",
                                   "--port-file", str(port_file)], stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if port_file.exists() and port_file.read_text().strip():
                    break
                time.sleep(0.05)
            server = ["--server", "127.0.0.1:" + port_file.read_text().strip()]
            golden = check([AGENT, "upload", str(SAMPLE / "golden"), "--project", "s", "--role", "golden",
                            "--json"] + server, "upload.schema.json")
            target = check([AGENT, "upload", str(SAMPLE / "target"), "--project", "s", "--role", "target",
                            "--against", golden["run_id"], "--json"] + server, "upload.schema.json", (1,))
            check([AGENT, "upload-pair", str(SAMPLE / "golden"), str(SAMPLE / "target"), "--project", "s",
                   "--json"] + server, "upload.schema.json", (1,))
            if golden is not None and golden["job"] is not None:
                failures.append("a golden run uploaded alone has no job")
            job = target["job"]["job_id"]
            local = check([PARITY, "compare", str(SAMPLE / "golden"), str(SAMPLE / "target"), "--json"],
                          "compare.schema.json", (1,))
            check([PARITY, "runs", "--json"] + server, "runs.schema.json")
            check([PARITY, "jobs", "--json"] + server, "jobs.schema.json")
            check([PARITY, "watch", job, "--json"] + server, "job.schema.json", (1,))
            check([PARITY, "submit", "--golden", golden["run_id"], "--target", target["run_id"], "--watch",
                   "--json"] + server, "job.schema.json", (1,))
            check([PARITY, "summary", job, "--json"] + server, "summary.schema.json", (1,))
            results = check([PARITY, "results", job, "--json", "--limit", "0"] + server, "results.schema.json", (1,))
            check([PARITY, "results", job, "--json", "--limit", "2"] + server, "results.schema.json", (1,))
            check([PARITY, "show", job, "Functional.linear.1.forward.output.0", "--json"] + server,
                  "item.schema.json", (1,))
            check([PARITY, "diff", job, job, "--json"] + server, "diff.schema.json")
            check([PARITY, "export", job, "--format", "json"] + server, "export.schema.json")
            check([PARITY, "status", "--json"] + server, "status.schema.json")
            # One vocabulary: the daemon's item documents are the local comparison's.
            if local is not None and results is not None:
                by_name = {i["name"]: i for i in local["items"]}
                for item in results["items"]:
                    if by_name.get(item["name"]) != item:
                        failures.append(f"item {item['name']}: parity results {json.dumps(item)} != "
                                        f"parity compare {json.dumps(by_name.get(item['name']))}")
                if len(results["items"]) != len(local["items"]):
                    failures.append("parity results and parity compare list different items")
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
        # The stopped daemon's store moved to a PostgreSQL server started for this check.
        postgres = [str(SRC / "tests" / "postgres.sh")]
        # Outside `tmp` (mode 0700): run as root, the server runs as the postgres user.
        pg_parent = tempfile.mkdtemp(prefix="parity_schema_pg_")
        os.chmod(pg_parent, 0o755)
        pg_dir = os.path.join(pg_parent, "postgres")
        started = subprocess.run(postgres + ["start", pg_dir], capture_output=True, text=True)
        if started.returncode != 0:
            failures.append(f"tests/postgres.sh start: {started.stderr[-500:]}")
        else:
            try:
                check([PARITY, "admin", "migrate-store", "--from", "sqlite:" + str(tmp / "data"), "--to",
                       started.stdout.strip().splitlines()[-1], "--json"], "migrate.schema.json")
            finally:
                subprocess.run(postgres + ["stop", pg_dir], capture_output=True)
        shutil.rmtree(pg_parent, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print(f"json schemas: {len(checked)} documents validated")
    return 1 if failures or len(checked) < 15 else 0


if __name__ == "__main__":
    sys.exit(main())
