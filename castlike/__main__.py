"""``python -m castlike``: the same as the ``castlike`` command."""

import sys

from .cli import main

sys.exit(main())
