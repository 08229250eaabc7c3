from __future__ import annotations

import sys
from pathlib import Path

# The test doubles beside these tests import as top-level modules (importlib mode).
sys.path.insert(0, str(Path(__file__).parent))
