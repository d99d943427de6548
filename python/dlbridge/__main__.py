"""python -m dlbridge [COMMAND ...]: runs the dlbridge command installed with
the package (``info`` when no command is given)."""

import os
import shutil
import subprocess
import sys
import sysconfig


def find_command():
    """The dlbridge command among this interpreter's scripts, else on PATH."""
    here = os.path.join(sysconfig.get_path("scripts"), "dlbridge")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("dlbridge")


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    command = find_command()
    if command is None:
        sys.stderr.write("python -m dlbridge: the dlbridge command is not "
                         "installed in %s (this Python's scripts) nor on PATH\n"
                         % sysconfig.get_path("scripts"))
        return 2
    return subprocess.call([command] + (args or ["info"]))


if __name__ == "__main__":
    sys.exit(main())
