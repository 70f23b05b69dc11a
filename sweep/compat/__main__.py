"""`python -m sweep.compat`."""

import sys

from sweep.compat.parser_check import main

sys.exit(main())
