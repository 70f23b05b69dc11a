"""`python -m sweep.reproduce`."""

import sys

from sweep.reproduce.remeasure import main

sys.exit(main())
