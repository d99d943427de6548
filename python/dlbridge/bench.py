"""Per-call cost of importing a tensor: dlbridge.from_dlpack against
numpy.from_dlpack, on the same objects, in one run.

    python -m dlbridge.bench [--calls N] [--repeats R]

(also `dlbridge bench`, and bench/bench_exchange.py in the source tree).

Prints the median time per call of each case over R rounds of N calls
(rounds interleaved so that drift in the machine's speed hits every case
alike), with the spread (fastest-slowest round), for the peers' imports,
__dlpack__ alone and the exchange-API path, and the ratios the project's
targets are about (the median over rounds of each round's ratio, with the
lowest and highest):

  numpy array:   dlbridge.from_dlpack(a)  vs  numpy.from_dlpack(a)   (<= 1)
  torch tensor:  dlbridge.from_dlpack(x)  vs  numpy.from_dlpack(x)   (<= 1)
  dlbridge.Tensor t, through its C exchange table:
                 dlbridge.from_dlpack(t)  vs  numpy.from_dlpack(a)   (>= 3x)

Exit status 1 when a target is missed.
"""

import argparse
import os
import statistics
import sys
import timeit

# OpenBLAS's spinning worker threads steal the CPU from the measured one.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402

try:
    import torch  # noqa: E402

    torch.set_num_threads(1)
except ImportError:  # torch is optional for the benchmark
    torch = None  # type: ignore[assignment]


def per_call_rounds(cases, calls, repeats):
    """cases: name -> (function, argument). Returns name -> list of seconds
    per call, one per round. Timed as the statement f(x), so no Python-level
    wrapper adds to the call being measured; rounds are interleaved so that
    drift in the machine's speed hits every case alike."""
    timers = {
        name: timeit.Timer("f(x)", globals={"f": fn, "x": arg})
        for name, (fn, arg) in cases.items()
    }
    rounds = {name: [] for name in cases}
    for _ in range(repeats):
        for name, timer in timers.items():
            rounds[name].append(timer.timeit(number=calls) / calls)
    return rounds


def round_ratio(rounds, num, den):
    """The median over rounds of rounds[num][i] / rounds[den][i], with the
    lowest and highest: (median, low, high). Each round times both cases
    within a few milliseconds, so a ratio within a round cancels the
    machine's drift between rounds, which a ratio of medians keeps."""
    ratios = [n / d for n, d in zip(rounds[num], rounds[den])]
    return statistics.median(ratios), min(ratios), max(ratios)


def _verdict(label, value, spread, target, good):
    print(f"{label} = {value}  (rounds {spread[0]:.3f}-{spread[1]:.3f})  "
          f"(target {target})  {'ok' if good else 'MISSED'}")
    return good


def _dunder(obj):
    """__dlpack__ alone: the producer's side of an exchange."""
    return obj.__dlpack__


def main(argv=None):
    """Runs the benchmark with command-line arguments argv (None:
    sys.argv[1:]); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dlbridge.from_dlpack(a)
    assert type(t).__dlpack_c_exchange_api__ is not None

    cases = {
        "numpy.from_dlpack(numpy array)": (np.from_dlpack, a),
        "dlbridge.from_dlpack(numpy array)": (dlbridge.from_dlpack, a),
        "dlbridge.from_dlpack(dlbridge.Tensor)": (dlbridge.from_dlpack, t),
        "numpy.from_dlpack(dlbridge.Tensor)": (np.from_dlpack, t),
        "numpy array.__dlpack__()": (lambda f: f(), _dunder(a)),
        "dlbridge.Tensor.__dlpack__()": (lambda f: f(), _dunder(t)),
    }
    if torch is not None:
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        cases["numpy.from_dlpack(torch tensor)"] = (np.from_dlpack, x)
        cases["dlbridge.from_dlpack(torch tensor)"] = (dlbridge.from_dlpack, x)
        cases["torch.from_dlpack(numpy array)"] = (torch.from_dlpack, a)
        cases["torch.from_dlpack(dlbridge.Tensor)"] = (torch.from_dlpack, t)

    # Warm every path (type caches, lazy adoption) before timing.
    for fn, arg in cases.values():
        for _ in range(1000):
            fn(arg)
    rounds = per_call_rounds(cases, args.calls, args.repeats)
    med = {name: statistics.median(r) for name, r in rounds.items()}

    print(f"{'case':44s} {'ns/call':>9s}   spread over {args.repeats} rounds")
    for name, r in rounds.items():
        print(f"{name:44s} {med[name] * 1e9:9.1f}   "
              f"{min(r) * 1e9:.1f}-{max(r) * 1e9:.1f}")
    print("(median per call; the __dlpack__() rows include dropping the capsule)")
    print()

    ok = True
    ratio, lo, hi = round_ratio(rounds, "dlbridge.from_dlpack(numpy array)",
                                "numpy.from_dlpack(numpy array)")
    ok &= _verdict("numpy array:  dlbridge / numpy", f"{ratio:.3f}", (lo, hi),
                   "<= 1", ratio <= 1.0)
    if torch is not None:
        ratio, lo, hi = round_ratio(rounds, "dlbridge.from_dlpack(torch tensor)",
                                    "numpy.from_dlpack(torch tensor)")
        ok &= _verdict("torch tensor: dlbridge / numpy", f"{ratio:.3f}",
                       (lo, hi), "<= 1", ratio <= 1.0)
    speedup, lo, hi = round_ratio(rounds, "numpy.from_dlpack(numpy array)",
                                  "dlbridge.from_dlpack(dlbridge.Tensor)")
    ok &= _verdict("exchange table: numpy.from_dlpack(numpy array) / "
                   "dlbridge.from_dlpack(Tensor)", f"{speedup:.2f}x", (lo, hi),
                   ">= 3", speedup >= 3.0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
