from __future__ import annotations

import sys
from pathlib import Path

# Test helpers beside the tests (speech_synth.py) import as top-level modules: pytest runs in
# importlib mode, where a `tests` package would clash with the other services' tests.
sys.path.insert(0, str(Path(__file__).parent))
