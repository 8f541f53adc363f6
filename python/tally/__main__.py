"""``python -m tally ...`` and the ``tally`` console script: the command that came with the
package (tally run, validate, plugins, compare, new-plugin)."""

import os
import sys


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    exe = os.path.join(here, "bin", "tally")
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"tally: the command is missing from this installation ({exe})\n")
        sys.exit(2)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
