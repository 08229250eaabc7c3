#!/usr/bin/env bash
# Back up a running her-os docker compose deployment into one directory:
#
#   deploy/backup.sh [DIR]          # default DIR: backups → backups/her-os-<UTC time>/
#
#   postgres.dump   pg_dump -Fc of the platform database (a consistent snapshot, taken live)
#   files.tar       the transcripts, events and enrollment volumes (the source of truth)
#   qdrant.tar      a snapshot of every Qdrant collection (Qdrant's snapshot API, live)
#   neo4j.dump      neo4j-admin database dump (Neo4j community must be stopped for it: it is,
#                   for the dump only; the engine retries graph writes meanwhile)
#   manifest.json   when, what, and the sha256 of each file; SHA256SUMS for `sha256sum -c`
#
# deploy/restore.sh puts such a directory back. docs/deploy.md, section 5.
# shellcheck source=deploy/lib.sh
source "$(dirname "$0")/lib.sh"

root=${1:-backups}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$root/her-os-$stamp"
umask 077
mkdir -p "$out"
neo4j_db=$(neo4j_database)
neo4j_was_running=""

restart_neo4j() {
  if [ -n "$neo4j_was_running" ]; then
    say "starting neo4j again"
    compose start neo4j >/dev/null
  fi
}
trap restart_neo4j EXIT

say "PostgreSQL → $out/postgres.dump"
# shellcheck disable=SC2016  # expanded inside the container, from its own environment
compose exec -T postgres sh -c 'exec pg_dump -Fc -U "$POSTGRES_USER" -d "$POSTGRES_DB"' \
  >"$out/postgres.dump"

say "transcripts, events, enrollment → $out/files.tar"
compose run --rm --no-deps -T --entrypoint tar audio-pipeline \
  -C /data -cf - transcripts events enrollment >"$out/files.tar"

say "Qdrant collections → $out/qdrant.tar"
compose run --rm --no-deps -T --entrypoint python context-engine \
  -c "$(cat deploy/qdrant_snapshots.py)" backup >"$out/qdrant.tar"

say "Neo4j ($neo4j_db) → $out/neo4j.dump (neo4j stops meanwhile)"
if [ -n "$(compose ps --status running --quiet neo4j)" ]; then
  neo4j_was_running=yes
  compose stop neo4j >/dev/null
fi
compose run --rm --no-deps -T --user neo4j --entrypoint neo4j-admin neo4j \
  database dump "$neo4j_db" --to-stdout >"$out/neo4j.dump"
restart_neo4j
neo4j_was_running=""

(cd "$out" && sha256sum postgres.dump files.tar qdrant.tar neo4j.dump >SHA256SUMS)
{
  printf '{\n  "format": "her-os compose backup 1",\n  "created": "%s",\n' "$stamp"
  printf '  "git": "%s",\n' "$(git describe --always --dirty 2>/dev/null || echo unknown)"
  printf '  "neo4j_database": "%s",\n  "files": {\n' "$neo4j_db"
  sep=""
  while read -r sum name; do
    printf '%s    "%s": {"sha256": "%s", "bytes": %s}' "$sep" "$name" "$sum" "$(stat -c %s "$out/$name")"
    sep=$',\n'
  done <"$out/SHA256SUMS"
  printf '\n  }\n}\n'
} >"$out/manifest.json"
say "backup complete: $out ($(du -sh "$out" | cut -f1))"
