"""`python -m specsweep COMMAND [ARGS]`."""

import sys

from specsweep.cli import main

sys.exit(main())
