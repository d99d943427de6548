"""Per-call cost of importing a tensor: dlbridge.from_dlpack against
numpy.from_dlpack, on the same objects, in one run.

    python bench/bench_exchange.py [--calls N] [--repeats R]

The benchmark is part of the package, as dlbridge.bench (`python -m
dlbridge.bench`, `dlbridge bench`); this script runs it with the installed
dlbridge, with the same output and exit status (1 when a target is missed).
"""

import sys

from dlbridge.bench import main

if __name__ == "__main__":
    sys.exit(main())
