#!/usr/bin/env bash
# Re-derive PostgreSQL, the knowledge graph, the vectors and the keyword index from the JSONL
# files alone (the source of truth), in this docker compose deployment:
#
#   deploy/rebuild.sh --yes
#
# Stops everything, deletes the postgres-data, neo4j-data, qdrant-data and search-index
# volumes (the transcripts, events, enrollment and model volumes stay), and starts again: on
# an empty database the context engine ingests every transcript, closes the silent sessions,
# extracts, writes the graph and embeds, as when they were recorded. docs/deploy.md, section 6.
# shellcheck source=deploy/lib.sh
source "$(dirname "$0")/lib.sh"

[ "${1:-}" = "--yes" ] || die "this deletes the derived stores (take deploy/backup.sh first); run with --yes"
project=${COMPOSE_PROJECT_NAME:-her-os}
derived=(postgres-data neo4j-data qdrant-data search-index)

say "stopping everything"
compose down
for volume in "${derived[@]}"; do
  if docker volume inspect "${project}_${volume}" >/dev/null 2>&1; then
    say "removing volume ${project}_${volume}"
    docker volume rm "${project}_${volume}" >/dev/null
  fi
done
say "starting again: the context engine re-ingests every transcript"
compose up -d
say "follow it with: docker compose logs -f context-engine"
