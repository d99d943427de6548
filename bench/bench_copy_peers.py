"""End-to-end copies: dlbridge against NumPy and PyTorch.

Each case makes a compact copy of a strided view, allocation included, the
way a user meets it: np.ascontiguousarray(view), torch's view.contiguous(),
and dlbridge's dlb_tensor_copy (through ctypes on libdlbridge.so, and
through the dlbridge module's Tensor.copy() when it is importable). The
methods run in turn in every rep, so drift on a shared machine hits them
alike; the table gives medians and the speed-up of dlbridge (median of
per-rep ratios).

Usage: python bench/bench_copy_peers.py [--reps N] [--lib PATH]
                                        [--json PATH] [--threads N]
"""

import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # the table then has no torch column
    torch = None

try:
    import dlbridge
except ImportError:
    dlbridge = None


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None,
                                 ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

KDLCPU = 1
# NumPy kind -> DLDataTypeCode.
DTYPE_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


def find_library(explicit):
    if explicit:
        return explicit
    if os.environ.get("DLBRIDGE_LIB"):
        return os.environ["DLBRIDGE_LIB"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = sorted(glob.glob(os.path.join(root, "build*", "src",
                                          "libdlbridge.so"))
                   + glob.glob(os.path.join(root, ".build*", "src",
                                            "libdlbridge.so")),
                   key=os.path.getmtime, reverse=True)
    if not found:
        sys.exit("libdlbridge.so not found: build the project or pass --lib")
    return found[0]


class CtypesBridge:
    """dlb_tensor_copy over a DLTensor that describes a NumPy array."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.dlb_tensor_copy.argtypes = [
            ctypes.POINTER(DLTensor), DLDevice,
            ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))]
        lib.dlb_tensor_copy.restype = ctypes.c_int
        lib.dlb_tensor_release.argtypes = [
            ctypes.POINTER(DLManagedTensorVersioned)]
        lib.dlb_tensor_release.restype = None
        lib.dlb_last_error.restype = ctypes.c_char_p
        lib.dlb_copy_set_threads.argtypes = [ctypes.c_int]
        lib.dlb_copy_get_threads.restype = ctypes.c_int
        self.lib = lib
        self.path = path

    def describe(self, arr):
        """A DLTensor for arr, kept alive with its shape and strides."""
        item = arr.itemsize
        shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
        strides = (ctypes.c_int64 * arr.ndim)(*[s // item
                                                for s in arr.strides])
        t = DLTensor()
        t.data = arr.ctypes.data
        t.device = DLDevice(KDLCPU, 0)
        t.ndim = arr.ndim
        t.dtype = DLDataType(DTYPE_CODES[arr.dtype.kind], item * 8, 1)
        t.shape = shape
        t.strides = strides
        t.byte_offset = 0
        return t, (arr, shape, strides)

    def copy(self, desc):
        out = ctypes.POINTER(DLManagedTensorVersioned)()
        st = self.lib.dlb_tensor_copy(ctypes.byref(desc), DLDevice(KDLCPU, 0),
                                      ctypes.byref(out))
        if st != 0:
            raise RuntimeError("dlb_tensor_copy: %d (%s)"
                               % (st, self.lib.dlb_last_error().decode()))
        return out

    def release(self, out):
        self.lib.dlb_tensor_release(out)

    def as_numpy(self, out, like):
        """A NumPy copy of a result, to check it."""
        t = out.contents.dl_tensor
        n = int(np.prod(like.shape))
        ptr = ctypes.cast(t.data + t.byte_offset,
                          ctypes.POINTER(ctypes.c_char))
        raw = ctypes.string_at(ptr, n * like.itemsize)
        return np.frombuffer(raw, dtype=like.dtype).reshape(like.shape)


def cases():
    rng = np.random.default_rng(0)
    a = rng.random((4096, 4096), dtype=np.float32)
    b = rng.random((64, 64, 64, 64), dtype=np.float32)
    # (name, base, view of a NumPy array, view of a torch tensor)
    return [
        ("contiguous 64 MiB", a, lambda x: x, lambda x: x),
        ("transpose 4096^2 f32", a, lambda x: x.T, lambda x: x.T),
        ("permute (3,1,0,2) 64^4", b, lambda x: x.transpose(3, 1, 0, 2),
         lambda x: x.permute(3, 1, 0, 2)),
        ("permute (2,0,1,3) 64^4", b, lambda x: x.transpose(2, 0, 1, 3),
         lambda x: x.permute(2, 0, 1, 3)),
        ("slice [::2, ::3]", a, lambda x: x[::2, ::3],
         lambda x: x[::2, ::3]),
    ]


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--lib", default=None,
                    help="libdlbridge.so (default: $DLBRIDGE_LIB or the "
                         "newest build*/src/libdlbridge.so)")
    ap.add_argument("--json", default="bench_copy_peers.json")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for dlbridge and torch (0: their default)")
    args = ap.parse_args()

    bridge = CtypesBridge(find_library(args.lib))
    if args.threads > 0:
        bridge.lib.dlb_copy_set_threads(args.threads)
        if torch is not None:
            torch.set_num_threads(args.threads)
    print("libdlbridge: %s (copy threads %d)" % (
        bridge.path, bridge.lib.dlb_copy_get_threads()))
    print("numpy %s, torch %s (threads %s), dlbridge module: %s" % (
        np.__version__, torch.__version__ if torch else "absent",
        torch.get_num_threads() if torch else "-",
        "yes" if dlbridge is not None else "not importable"))

    results = []
    for name, base, make_view, make_tview in cases():
        view = make_view(base)
        desc, keep = bridge.describe(view)
        methods = {
            "numpy": lambda: np.ascontiguousarray(view) if view is not base
            else view.copy(),
        }
        if torch is not None:
            tview = make_tview(torch.from_numpy(base))
            methods["torch"] = (lambda: tview.contiguous()) \
                if view is not base else (lambda: tview.clone())

        def via_ctypes():
            bridge.release(bridge.copy(desc))
        methods["dlbridge (ctypes)"] = via_ctypes
        if dlbridge is not None:
            dview = dlbridge.from_dlpack(view)
            methods["dlbridge (module)"] = lambda: dview.copy()

        # Check once, warm every method (first-touch, thread pools).
        out = bridge.copy(desc)
        ok = np.array_equal(bridge.as_numpy(out, view),
                            np.ascontiguousarray(view))
        bridge.release(out)
        if not ok:
            sys.exit("%s: dlbridge's copy differs from NumPy's" % name)
        for fn in methods.values():
            fn()

        times = {m: [] for m in methods}
        for _ in range(args.reps):
            for m, fn in methods.items():
                times[m].append(timed(fn))
        ours = times["dlbridge (ctypes)"]
        row = {"case": name, "bytes": int(view.nbytes), "median_s": {},
               "min_s": {}, "max_s": {}, "dlbridge_speedup": {}}
        for m, ts in times.items():
            row["median_s"][m] = statistics.median(ts)
            row["min_s"][m] = min(ts)
            row["max_s"][m] = max(ts)
        for peer in ("numpy", "torch"):
            if peer in times:
                row["dlbridge_speedup"][peer] = statistics.median(
                    p / o for p, o in zip(times[peer], ours))
        results.append(row)
        del keep

    print("\n%-24s %-18s %10s %10s %10s" % ("case", "method", "median ms",
                                          "min ms", "max ms"))
    for row in results:
        for m in row["median_s"]:
            print("%-24s %-18s %10.2f %10.2f %10.2f" % (
                row["case"], m, row["median_s"][m] * 1e3,
                row["min_s"][m] * 1e3, row["max_s"][m] * 1e3))
        print("%-24s %s" % ("", "  ".join(
            "dlbridge speed-up vs %s: %.2fx" % (k, v)
            for k, v in row["dlbridge_speedup"].items())))
    with open(args.json, "w") as f:
        json.dump({"reps": args.reps, "library": bridge.path,
                   "threads": bridge.lib.dlb_copy_get_threads(),
                   "numpy": np.__version__,
                   "torch": torch.__version__ if torch else None,
                   "cases": results}, f, indent=2)
    print("\nwrote %s" % args.json)


if __name__ == "__main__":
    main()
