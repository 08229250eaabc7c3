#!/usr/bin/env bash
# Set up a fresh clone: the Debian packages the platform and its tests need, uv, and the
# locked Python environment (.venv from uv.lock). Safe to run again: it only does what is missing.
#
#   scripts/bootstrap.sh            Python environment (+ Debian packages)
#   scripts/bootstrap.sh --node     also the dashboard's npm packages
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9
NODE_MAJOR_MIN=20
say() { printf '\033[1;34m[bootstrap]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[bootstrap]\033[0m %s\n' "$*" >&2; exit 1; }

# 1. Debian packages listed in deploy/apt-packages.txt (comments and blank lines ignored).
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' deploy/apt-packages.txt)
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# 2. Python 3.11 and uv (pinned).
command -v python3.11 >/dev/null || die "Python 3.11 is required (python3.11 not found on PATH)"
if ! python3.11 -m uv --version 2>/dev/null | grep -q "uv $UV_VERSION"; then
  say "installing uv $UV_VERSION"
  python3.11 -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi

# 3. The locked environment: every member of the workspace and the dev tools.
say "syncing the Python environment (.venv) from uv.lock"
UV_PYTHON_DOWNLOADS=never python3.11 -m uv sync --frozen --python python3.11 --quiet

# 4. The dashboard's npm packages, from its lock file.
if [ "${1:-}" = "--node" ]; then
  command -v node >/dev/null || die "Node.js >= $NODE_MAJOR_MIN is required for the dashboard"
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge "$NODE_MAJOR_MIN" ] || die "Node.js >= $NODE_MAJOR_MIN is required (found $(node -v))"
  # npm ci wipes node_modules and installs again (tens of seconds): only when the lock file or
  # Node.js changed since the last install, which leaves a stamp of both in node_modules.
  stamp=dashboard/node_modules/.her-os-installed
  want="$(sha256sum dashboard/package-lock.json | cut -d' ' -f1) node $(node -v)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    say "the dashboard's npm packages are up to date"
  else
    say "installing the dashboard's npm packages (npm ci)"
    (cd dashboard && npm ci --no-audit --no-fund --loglevel=error)
    printf '%s\n' "$want" >"$stamp"
  fi
fi
say "ready"
