"""The layout of the data directory. Everything `her-os up` keeps lives under one root."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The supervisor's own log (data/logs/supervisor.log), beside one log per component.
SUPERVISOR = "supervisor"


@dataclass(frozen=True)
class DataLayout:
    root: Path

    @property
    def postgres(self) -> Path:
        """PGDATA."""
        return self.root / "postgres"

    @property
    def falkordb(self) -> Path:
        return self.root / "falkordb"

    @property
    def transcripts(self) -> Path:
        return self.root / "transcripts"

    @property
    def events(self) -> Path:
        return self.root / "events"

    @property
    def models(self) -> Path:
        """Bundled models assembled for use (e.g. the two-part Whisper model)."""
        return self.root / "models"

    @property
    def enrollment(self) -> Path:
        """The audio pipeline's speaker enrollment bank (who is who: back it up)."""
        return self.root / "enrollment"

    @property
    def spool(self) -> Path:
        """Live sessions' audio spilled to disk for the sweep (scratch: cleared on start)."""
        return self.root / "spool"

    @property
    def search_index(self) -> Path:
        """The context engine's keyword index (derived: rebuilt from PostgreSQL if lost)."""
        return self.root / "search-index"

    @property
    def vectors(self) -> Path:
        """The embedded vector index (Qdrant Edge shards), rebuilt from PostgreSQL if lost."""
        return self.root / "vectors"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        """Runtime files: the state file, the lock, generated configs, the PostgreSQL socket."""
        return self.root / "run"

    @property
    def secrets(self) -> Path:
        return self.root / "secrets"

    @property
    def state_file(self) -> Path:
        return self.run / "state.json"

    @property
    def lock_file(self) -> Path:
        return self.run / "supervisor.lock"

    @property
    def postgres_socket_dir(self) -> Path:
        return self.run / "postgres"

    @property
    def falkordb_conf(self) -> Path:
        return self.run / "falkordb.conf"

    def log_file(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def create(self) -> None:
        """Create every directory (idempotent). Secrets are private to the owner."""
        for path in (self.root, self.falkordb, self.transcripts, self.events, self.logs, self.run):
            path.mkdir(parents=True, exist_ok=True)
        self.secrets.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.secrets, 0o700)  # mkdir's mode is masked by umask, and may pre-exist
