"""`python -m sweep.adaptive`."""

import sys

from sweep.adaptive.head_to_head import main

sys.exit(main())
