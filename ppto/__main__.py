"""``python -m ppto``: the ``ppto`` command line (see ``ppto.cli``)."""

from ppto.cli import main

raise SystemExit(main())
