#!/usr/bin/env python3
"""Mutation testing (opt-in, not in CI): applies each mutant of mutants.py to a copy of the
checkout, rebuilds only the test binaries it names, runs them and reports which mutants every
test survived. A mutant is killed when one of its tests fails (or times out).

  tests/mutation/run.py [--check] [--work DIR] [--only ID[,ID...]] [--timeout SECONDS]

--check only verifies that every mutant still applies (its function exists and its text occurs
once in it). The copy and its build stay in --work (default $PARITY_MUTATION_DIR or
/tmp/parity-mutation) so that later runs rebuild incrementally. Exit 0 when every mutant was
killed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from mutants import MUTANTS  # noqa: E402


def function_span(text, function):
    """[start, end) of the function whose definition starts with `function`: to its first line
    that is exactly "}"."""
    start = text.find(function)
    if start < 0 or text.find(function, start + 1) >= 0:
        return None
    end = text.find("\n}\n", start)
    return (start, len(text) if end < 0 else end + 2)


def mutate(text, m):
    """The mutated text, or an error string."""
    span = function_span(text, m["function"])
    if span is None:
        return None, "function '%s' not found exactly once" % m["function"]
    body = text[span[0]:span[1]]
    n = body.count(m["find"])
    if n != 1:
        return None, "'%s' occurs %d times in %s" % (m["find"], n, m["function"])
    at = span[0] + body.find(m["find"])
    return text[:at] + m["replace"] + text[at + len(m["find"]):], None


def sync(work):
    """Copies the checkout's tracked files into work/src, keeping unchanged files' times."""
    src = os.path.join(work, "src")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        a, b = os.path.join(ROOT, f), os.path.join(src, f)
        if os.path.islink(a) or not os.path.isfile(a):
            continue
        if os.path.exists(b) and open(a, "rb").read() == open(b, "rb").read():
            continue
        os.makedirs(os.path.dirname(b), exist_ok=True)
        shutil.copy2(a, b)
    return src


# Tests that run the programs (cli_test, server_test, ...) need them built as well.
PROGRAMS = {"parity", "parity-agent", "parityd"}


def build(work, src, targets):
    targets = set(targets) | PROGRAMS
    bdir = os.path.join(work, "build")
    if not os.path.exists(os.path.join(bdir, "build.ninja")):
        subprocess.run(["cmake", "-S", src, "-B", bdir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                       check=True, stdout=subprocess.DEVNULL)
    r = subprocess.run(["cmake", "--build", bdir, "-j", os.environ.get("PARITY_JOBS", "2"), "--target"] +
                       sorted(targets), capture_output=True, text=True)
    return bdir, r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def run_tests(bdir, tests, timeout):
    """None when every test passed, else the first that failed."""
    for binary, flt in tests:
        cmd = [os.path.join(bdir, "tests", binary), "--gtest_filter=" + flt, "--gtest_brief=1"]
        try:
            r = subprocess.run(cmd, cwd=bdir, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "%s (timed out)" % binary
        if r.returncode != 0:
            return binary
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--work", default=os.environ.get("PARITY_MUTATION_DIR", "/tmp/parity-mutation"))
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    chosen = [m for m in MUTANTS if not a.only or m["id"] in a.only.split(",")]
    bad = 0
    for m in chosen:
        _, err = mutate(open(os.path.join(ROOT, m["file"])).read(), m)
        if err:
            print("%-40s does not apply: %s" % (m["id"], err))
            bad += 1
    if a.check or bad:
        print("%d mutants, %d do not apply" % (len(chosen), bad))
        return 1 if bad else 0
    os.makedirs(a.work, exist_ok=True)
    src = sync(a.work)
    targets = {b for m in chosen for b, _ in m["tests"]}
    bdir, ok, log = build(a.work, src, targets)
    failing = run_tests(bdir, sorted({t for m in chosen for t in m["tests"]}), a.timeout) if ok else None
    if not ok or failing:
        print("the unmutated %s; nothing to measure\n%s" % (
            "build fails" if not ok else "test %s fails" % failing, log if not ok else ""))
        return 2
    survived, broken = [], []
    for m in chosen:
        path = os.path.join(src, m["file"])
        original = open(path).read()
        mutated, _ = mutate(original, m)
        started = time.time()
        try:
            with open(path, "w") as f:
                f.write(mutated)
            _, ok, log = build(a.work, src, {b for b, _ in m["tests"]})
            killer = run_tests(bdir, m["tests"], a.timeout) if ok else None
        finally:
            with open(path, "w") as f:
                f.write(original)  # newer than the mutant's objects: rebuilt when next needed
        if not ok:
            outcome = "DOES NOT COMPILE"
            broken.append(m["id"])
        elif killer:
            outcome = "killed by " + killer
        else:
            outcome = "SURVIVED"
            survived.append(m["id"])
        print("%-40s %-36s %5.0f s" % (m["id"], outcome, time.time() - started), flush=True)
    killed = len(chosen) - len(survived) - len(broken)
    print("%d mutants: %d killed (%.0f %%), %d survived%s, %d do not compile%s" % (
        len(chosen), killed, 100.0 * killed / len(chosen), len(survived),
        " (" + ", ".join(survived) + ")" if survived else "", len(broken),
        " (" + ", ".join(broken) + ")" if broken else ""))
    return 0 if not survived and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
