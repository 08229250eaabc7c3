from __future__ import annotations

import sys
from pathlib import Path

# The test doubles beside these tests import as top-level modules (importlib mode).
sys.path.insert(0, str(Path(__file__).parent))

# Pipecat logs through loguru, whose default sink is the stderr of import time; under pytest's
# output capture that stream is replaced, so log to the real stderr, warnings and up only.
from loguru import logger

logger.remove()
logger.add(sys.__stderr__, level="WARNING")
