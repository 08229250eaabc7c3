#!/usr/bin/env bash
# Restore a backup made by deploy/backup.sh into this docker compose deployment:
#
#   deploy/restore.sh backups/her-os-<UTC time>
#
# Checks the files against SHA256SUMS, stops the her-os services, then replaces PostgreSQL's
# database, the transcripts/events/enrollment volumes, Neo4j's database and every Qdrant
# collection with the backup's, and starts everything again. What was there is overwritten:
# take a backup first if it may be needed. docs/deploy.md, section 5.
# shellcheck source=deploy/lib.sh
source "$(dirname "$0")/lib.sh"

[ $# -eq 1 ] || die "usage: deploy/restore.sh BACKUP_DIR"
src=$1
[ -f "$src/manifest.json" ] || die "$src is not a her-os backup (no manifest.json)"
(cd "$src" && sha256sum --quiet -c SHA256SUMS) || die "$src: a file does not match SHA256SUMS"
neo4j_db=$(neo4j_database)

say "stopping the her-os services"
compose stop dashboard annie-voice context-engine audio-pipeline >/dev/null
say "starting the stores"
compose up -d --wait postgres qdrant >/dev/null

say "PostgreSQL ← postgres.dump"
# shellcheck disable=SC2016  # expanded inside the container, from its own environment
compose exec -T postgres sh -c \
  'exec pg_restore --clean --if-exists --no-owner --exit-on-error -U "$POSTGRES_USER" -d "$POSTGRES_DB"' \
  <"$src/postgres.dump"

say "transcripts, events, enrollment ← files.tar"
compose run --rm --no-deps -T --entrypoint sh audio-pipeline -c \
  'find /data/transcripts /data/events /data/enrollment -mindepth 1 -delete && tar -C /data -xf -' \
  <"$src/files.tar"

say "Qdrant ← qdrant.tar"
compose run --rm --no-deps -T --entrypoint python context-engine \
  -c "$(cat deploy/qdrant_snapshots.py)" restore <"$src/qdrant.tar"

say "Neo4j ($neo4j_db) ← neo4j.dump"
compose stop neo4j >/dev/null
compose run --rm --no-deps -T --user neo4j --entrypoint neo4j-admin neo4j \
  database load "$neo4j_db" --from-stdin --overwrite-destination=true <"$src/neo4j.dump"

say "starting everything"
compose up -d
say "restored from $src"
