"""The ``fieldhub`` command, installed with this package.

The same command as the ``fieldhub`` binary — ``hub``, ``dump``, ``send``,
``gen``, ``stats``, ``record``, ``replay``, ``ctl``, ``frame-bits``, ``bench``,
``bridge`` — run inside the extension module, so ``pip install fieldhub`` is
all a Python user needs for the tools the docs show. ``python -m fieldhub.cli``
is the same.
"""

import sys

from fieldhub import _native


def main() -> int:
    # The benchmarks start hubs and peers with the same command: this
    # interpreter running this module.
    this_command = [sys.executable, "-m", "fieldhub.cli"]
    return _native.run_cli(["fieldhub", *sys.argv[1:]], this_command)


if __name__ == "__main__":
    sys.exit(main())
