"""Every benchmark of a build tree in one run: one summary table, one JSON.

    python bench/run_bench.py --build BUILD_DIR [--quick] [--out DIR]
                              [BENCH_COPY_ARGS...]

Runs, in this order, each printing its own table as it goes:

  bench_copy            the CPU copy engine against memcpy and against
                        the machine's copy limit (C)
  bench_gpu             host <-> device and device-to-device bandwidth
                        against the driver's cuMemcpy ("no GPU: ..." without)
  bench_import          the C-level import of a foreign versioned tensor, ns
  callgrind.sh          the same, as instructions per call (needs valgrind)
  bench_copy_peers.py   copies against NumPy and PyTorch, end to end
  bench_exchange.py     per-call exchange cost through the Python module,
                        when the file exists and the module imports

then prints the headline figures of all of them and writes every result,
with the machine it ran on, to DIR/bench-<UTC time>.json and
DIR/latest.json (DIR defaults to bench/results). A step that fails is
reported and the others still run; the exit status is 1 if any failed.
Extra arguments go to bench_copy. --quick runs every step with fewer
repetitions, for a smoke test, not for figures.
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def machine():
    info = {"platform": platform.platform(), "python": sys.version.split()[0]}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cpus_online"] = os.cpu_count()
    if hasattr(os, "sched_getaffinity"):
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            info["transparent_hugepages"] = f.read().strip()
    except OSError:
        pass
    try:
        info["loadavg"] = os.getloadavg()
    except OSError:
        pass
    return info


class Step:
    def __init__(self, name, argv, json_path=None, env=None,
                 ok_codes=(0,)):
        self.name, self.argv, self.json_path = name, argv, json_path
        self.env, self.ok_codes = env, ok_codes
        self.status, self.seconds, self.result, self.stdout = None, 0.0, None, ""

    def run(self):
        print("\n=== %s: %s" % (self.name, " ".join(self.argv)), flush=True)
        t0 = time.monotonic()
        env = dict(os.environ, **(self.env or {}))
        try:
            proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=env,
                                    text=True, cwd=ROOT)
        except OSError as e:
            self.status = "failed: %s" % e
            print(self.status)
            return
        lines = []
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
        code = proc.wait()
        self.seconds = time.monotonic() - t0
        self.stdout = "".join(lines)
        if code in self.ok_codes:
            self.status = "ok" if code == 0 else "exit %d" % code
        else:
            self.status = "failed: exit %d" % code
        if self.json_path and os.path.exists(self.json_path):
            with open(self.json_path) as f:
                self.result = json.load(f)

    def record(self):
        return {"argv": self.argv, "status": self.status,
                "seconds": round(self.seconds, 2), "result": self.result,
                "output": self.stdout if self.result is None else None}


def parse_exchange(text):
    """bench_exchange.py prints 'case  ns' rows and ratio lines."""
    cases, ratios = {}, []
    for line in text.splitlines():
        m = re.match(r"^(\S.*?\))\s+([0-9]+(?:\.[0-9]+)?)(?:\s+\S+)?\s*$", line)
        if m:
            cases[m.group(1)] = float(m.group(2))
        elif "target" in line:
            ratios.append(line.strip())
    return {"ns_per_call": cases, "targets": ratios}


def summary(steps, started):
    out = []
    p = out.append
    p("")
    p("=" * 78)
    m = machine()
    p("dlbridge benchmarks, %s UTC, %s, %s CPUs usable" % (
        started.strftime("%Y-%m-%d %H:%M"), m.get("cpu", "?"),
        m.get("cpus_usable", m.get("cpus_online", "?"))))
    p("medians; spread (min-max) in the step tables above and in the JSON")
    p("=" * 78)
    for s in steps:
        p("%-22s %-28s %6.1f s" % (s.name, s.status, s.seconds))

    ex = steps_by(steps, "exchange")
    if ex is not None and ex.result:
        p("\nexchange cost per call (Python, median of rounds), ns")
        for k, v in ex.result["ns_per_call"].items():
            p("  %-48s %8.1f" % (k, v))
        for line in ex.result["targets"]:
            p("  " + line)

    imp, cg = steps_by(steps, "import"), steps_by(steps, "callgrind")
    if imp is not None and imp.result:
        per = {}
        if cg is not None and cg.result:
            per = {c["name"]: c["per_call"] for c in cg.result["cases"]}
        p("\nC-level import of a foreign versioned tensor")
        p("  %-40s %9s %13s %12s" % ("", "median ns", "min-max ns",
                                       "instr/call"))
        for c in imp.result["cases"]:
            p("  %-40s %9.1f %6.1f-%-6.1f %12s" % (
                c["label"], c["median_ns"], c["min_ns"], c["max_ns"],
                per.get(c["name"], "-")))

    cp = steps_by(steps, "copy")
    if cp is not None and cp.result:
        p("\nCPU copy into preallocated memory, GB/s read + written "
          "(x memcpy, x limit: same run)")
        p("  the limit: the fastest of memcpy, non-temporal stores (with "
          "and without reading ahead; 32- and 64-byte ones where the CPU "
          "has them) and rep movsb")
        p("  %-24s %12s %23s %23s" % ("case", "memcpy", "1 thread",
                                        "all threads"))
        mem, row = None, {}
        for c in cp.result["cases"] + [{"threads": 0}]:
            if c.get("reference"):
                continue
            if c["threads"] == 0:
                if row:
                    p("  %-24s %7.2f GB/s %s" % (name, mem, "  ".join(
                        "%6.2f %5.2f x %5.2f lim" % (
                            r["gbps"], r["vs_memcpy"], r.get("vs_limit", 0))
                        for r in row.values())))
                mem, row = c.get("gbps"), {}
            else:
                name = c["name"]
                row[c["threads"]] = c
        lim = [c for c in cp.result["cases"]
               if c.get("reference") and c["name"].startswith("limit =")]
        if lim:
            p("  %-24s %s" % ("limit (64 MiB)", "  ".join(
                "%d thread(s) %.2f GB/s (%s)" % (c["threads"], c["gbps"],
                                                 c["name"][8:])
                for c in lim[:2])))

    peers = steps_by(steps, "peers")
    if peers is not None and peers.result:
        p("\nend-to-end copies with allocation, median ms "
          "(dlbridge's speed-up, same run)")
        for r in peers.result["cases"]:
            med = r["median_s"]
            cols = "  ".join("%s %.2f" % (k, v * 1e3) for k, v in med.items())
            sp = "  ".join("%.2fx vs %s" % (v, k)
                           for k, v in r["dlbridge_speedup"].items())
            p("  %-24s %s" % (r["case"], cols))
            p("  %-24s %s" % ("", sp))

    gpu = steps_by(steps, "gpu")
    if gpu is not None and gpu.result:
        if not gpu.result.get("gpu"):
            p("\nGPU: no GPU: %s" % gpu.result.get("reason", "?"))
        else:
            p("\nGPU %s, %d bytes per copy: GB/s (x link, same run)" % (
                gpu.result["name"], gpu.result["bytes"]))
            for c in gpu.result["cases"]:
                p("  %-4s %-28s %8.2f GB/s  %5.2f x" % (
                    c["dir"], c["name"], c["gbps"], c["vs_reference"]))
    return "\n".join(out)


def steps_by(steps, name):
    for s in steps:
        if s.name == name:
            return s
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="the Meson build tree")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--quick", action="store_true")
    args, copy_args = ap.parse_known_args()
    build = os.path.abspath(args.build)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    q = args.quick
    started = datetime.datetime.now(datetime.timezone.utc)

    def res(name):
        return os.path.join(out, name)

    def tool(name):
        return os.path.join(build, "bench", name)

    py = sys.executable
    steps = [
        Step("copy", [tool("bench_copy")]
             + (["--quick"] if q else ["--reps", "51"]) + copy_args
             + ["--json", res("bench_copy.json")], res("bench_copy.json")),
        Step("gpu", [tool("bench_gpu")] + (["--quick"] if q else [])
             + ["--json", res("bench_gpu.json")], res("bench_gpu.json")),
        Step("import", [tool("bench_import")]
             + (["--calls", "20000", "--reps", "5"] if q else [])
             + ["--json", res("bench_import.json")], res("bench_import.json")),
        Step("callgrind", ["sh", os.path.join(HERE, "callgrind.sh"), build,
                           res("callgrind.json")], res("callgrind.json"),
             env={"CALLS": "2000" if q else "20000"}),
        Step("peers", [py, os.path.join(HERE, "bench_copy_peers.py"),
                       "--reps", "3" if q else "21",
                       "--lib", os.path.join(build, "src", "libdlbridge.so"),
                       "--json", res("bench_copy_peers.json")],
             res("bench_copy_peers.json")),
    ]
    exchange = os.path.join(HERE, "bench_exchange.py")
    if os.path.exists(exchange):
        # Exit 1 there means a target was missed: a result, not a failure.
        steps.append(Step("exchange", [py, exchange]
                          + (["--calls", "5000", "--repeats", "3"] if q
                             else []), ok_codes=(0, 1)))
    for s in steps:
        if s.json_path and os.path.exists(s.json_path):
            os.remove(s.json_path)
        s.run()
        if s.name == "exchange":
            if "ns/call" in s.stdout:
                s.result = parse_exchange(s.stdout)
                if s.status == "exit 1":
                    s.status = "ok, a target missed"
            elif s.status.startswith(("ok", "exit")):
                last = s.stdout.strip().splitlines() or ["no output"]
                s.status = "failed: %s" % last[-1][:60]
        if s.name == "callgrind" and s.status == "failed: exit 3":
            s.status = "skipped: no valgrind"

    text = summary(steps, started)
    print(text)
    record = {
        "date_utc": started.isoformat(timespec="seconds"),
        "machine": machine(),
        "build": build,
        "quick": q,
        "steps": {s.name: s.record() for s in steps},
        "summary": text,
    }
    stamp = started.strftime("%Y%m%d-%H%M%S")
    for name in ("bench-%s.json" % stamp, "latest.json"):
        with open(res(name), "w") as f:
            json.dump(record, f, indent=2)
    print("\nwrote %s and %s" % (res("bench-%s.json" % stamp),
                                 res("latest.json")))
    failed = [s.name for s in steps if s.status.startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
