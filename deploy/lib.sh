# shellcheck shell=bash
# Shared by deploy/backup.sh, restore.sh and rebuild.sh (sourced, not run).
# They run docker compose from the repository root, so .env and COMPOSE_FILE apply as for
# any other `docker compose` command (set COMPOSE_FILE=docker-compose.yml:docker-compose.gpu.yml
# on a GPU box).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf '\033[1;34m[her-os]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[her-os]\033[0m %s\n' "$*" >&2; exit 1; }

compose() { docker compose "$@"; }

# The Neo4j database name (NEO4J_DATABASE in .env, default neo4j).
neo4j_database() {
  local db=""
  [ -f .env ] && db=$(sed -n 's/^NEO4J_DATABASE=//p' .env | tail -n 1)
  printf '%s' "${db:-neo4j}"
}

command -v docker >/dev/null || die "docker is not installed"
docker compose version >/dev/null 2>&1 || die "the docker compose v2 plugin is not installed"
