"""``python -m rag_core.cli``: the same as the ``rag-pipeline`` command."""

import sys

from rag_core.cli import main

sys.exit(main())
