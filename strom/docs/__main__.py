"""``python -m strom.docs``: see ``strom.docs.main``."""

import sys

from strom.docs import main

sys.exit(main())
