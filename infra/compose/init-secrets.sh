#!/usr/bin/env bash
# Makes everything docker-compose.yml reads that must never be committed (infra/README.md, "Compose"):
#
#   secrets/keys/token.key              mints agent tokens — stays here, never mounted into a container
#   secrets/keys/token.pub              dispatcher: verifies tokens               (forge keys init)
#   secrets/keys/signing.secret         dispatcher: signs calls                   (forge keys init)
#   secrets/call-key.<tier>             each tier's workers: their queue's key    (forge keys worker-key)
#   secrets/fleet.acl                   Redis: one user per role, SHA-256 of each password (npm run redis:acl)
#   secrets/redis-passwords.env         the generated Redis passwords (the generator's passwords file)
#   secrets/<service>.env               REDIS_URL of each service, with its own Redis user and password
#   seccomp/sandbox-worker.json         Docker's default seccomp profile plus unshare(2), for the sandbox workers
#
# Run after `npm ci` (it builds the forge CLI). Running it again keeps existing keys and passwords.
#
#   infra/compose/init-secrets.sh [--skip-seccomp]
#   (--out DIR and --seccomp-out FILE write elsewhere; docker-compose.yml reads ./secrets and ./seccomp.)
#
# Redis passwords: FORGE_REDIS_PASSWORD_<ROLE> from the environment when set (at least 16 characters; set it on
# every run, it is not saved), else generated once and kept in secrets/redis-passwords.env (infra/redis/README.md).
# Seccomp base profile: FORGE_SECCOMP_BASE (a file or an https URL) when set, else the default profile of the
# running Docker engine's version, downloaded from the moby repository.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$here/secrets"
seccomp_file="$here/seccomp/sandbox-worker.json"
skip_seccomp=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --seccomp-out) seccomp_file="$2"; shift 2 ;;
    --skip-seccomp) skip_seccomp=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "init-secrets: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done

# The prefix every service uses (forge.env): worker keys and ACL users are derived from it.
prefix="$(sed -n 's/^FORGE_PREFIX=//p' "$here/forge.env")"
prefix="${prefix:-forge}"
forge_cli="$root/apps/cli/bin/forge.js"
if [ ! -f "$root/apps/cli/dist/main.js" ]; then
  echo "init-secrets: the forge CLI is not built; run 'npm ci' in $root first" >&2
  exit 1
fi
forge() { node "$forge_cli" "$@"; }

umask 077
mkdir -p "$out/keys"
chmod 700 "$out"

# 1. Token key pair and call-signing secret (kept if present: replacing them invalidates every token and worker key).
if [ -f "$out/keys/signing.secret" ]; then
  echo "init-secrets: keeping the keys in $out/keys"
else
  forge keys init --dir "$out/keys"
fi

# Files made again below are read-only from the last run: remove them first.
rm -f "$out"/call-key.* "$out/fleet.acl" "$out"/dispatcher.env "$out"/worker-*.env

# 2. One call key per queue: each tier's workers can verify (not forge) only their own queue's calls.
for tier in platform embedded host; do
  forge keys worker-key --secret "$out/keys/signing.secret" --tier "$tier" --prefix "$prefix" > "$out/call-key.$tier"
done

# 3. Redis ACL: one user per role (and <prefix>-audit, the dispatchers' audit keeper); the file holds only SHA-256
#    hashes. --admin adds <prefix>-admin for operators.
(cd "$root" && FORGE_PREFIX="$prefix" node scripts/redis-acl.mjs --admin --passwords-file "$out/redis-passwords.env" --out "$out/fleet.acl")

# 4. Each service's REDIS_URL, with its own user. Passwords are percent-encoded into the URL.
password_of() {
  local var="FORGE_REDIS_PASSWORD_$1"
  if [ -n "${!var:-}" ]; then printf '%s' "${!var}"; return; fi
  sed -n "s/^$var=//p" "$out/redis-passwords.env"
}
redis_url() {
  node -e 'process.stdout.write(`redis://${encodeURIComponent(process.argv[1])}:${encodeURIComponent(process.argv[2])}@redis:6379`)' "$1" "$2"
}
write_env() { # service role ROLE_VAR
  local file="$out/$1.env" user="$prefix-$2"
  {
    echo "# Made by init-secrets.sh: $1 connects to Redis as $user (infra/redis/README.md)."
    echo "REDIS_URL=$(redis_url "$user" "$(password_of "$3")")"
  } > "$file"
}
write_env dispatcher dispatcher DISPATCHER
write_env worker-platform worker-platform WORKER_PLATFORM
write_env worker-embedded worker-embedded WORKER_EMBEDDED
write_env worker-host worker-host WORKER_HOST
{
  echo "# The audit keeper: files every role's audit inbox into the stream (the one user that may write it) and reads"
  echo "# it for GET /v1/audit. Keep it apart from REDIS_URL: a leaked dispatcher user then cannot rewrite the audit."
  echo "FORGE_AUDIT_REDIS_URL=$(redis_url "$prefix-audit" "$(password_of AUDIT)")"
} >> "$out/dispatcher.env"

# Containers read these as their own users (10001 for the fleet, 999 for Redis), not as the operator: the files are
# world-readable, and the 0700 directory above them keeps other users of this machine out. token.key and the
# *.env files stay 0600: only docker compose (run by the operator) reads them.
chmod 0444 "$out/keys/token.pub" "$out/keys/signing.secret" "$out"/call-key.* "$out/fleet.acl"
chmod 0600 "$out/keys/token.key" "$out"/*.env

# 5. Seccomp profile for the sandbox workers: the engine's default profile, plus unshare(2) for anyone. Nothing else
#    changes: mount, setns, clone3 and the rest stay as the default has them, and no capability is added.
if [ "$skip_seccomp" = 1 ]; then
  echo "init-secrets: skipped the seccomp profile ($seccomp_file must exist before 'docker compose up')"
elif [ -f "$seccomp_file" ]; then
  echo "init-secrets: keeping $seccomp_file"
else
  base="${FORGE_SECCOMP_BASE:-}"
  if [ -z "$base" ]; then
    version="$(docker version --format '{{.Server.Version}}')"
    base="https://raw.githubusercontent.com/moby/moby/v$version/profiles/seccomp/default.json"
  fi
  mkdir -p "$(dirname "$seccomp_file")"
  node - "$base" "$seccomp_file" <<'NODE'
const { readFileSync, writeFileSync } = require('node:fs');
const [source, target] = process.argv.slice(2);
(async () => {
  let text;
  if (/^https?:\/\//.test(source)) {
    const response = await fetch(source);
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    text = await response.text();
  } else {
    text = readFileSync(source, 'utf8');
  }
  const profile = JSON.parse(text);
  if (profile.defaultAction === undefined || !Array.isArray(profile.syscalls)) throw new Error(`${source} is not a seccomp profile`);
  profile.syscalls.push({
    names: ['unshare'],
    action: 'SCMP_ACT_ALLOW',
    comment: 'Forge Fleet sandbox: unprivileged user, network and PID namespaces (docs/sandbox.md)',
  });
  writeFileSync(target, `${JSON.stringify(profile, null, 2)}\n`, { mode: 0o644 });
})().catch((error) => {
  console.error(`init-secrets: cannot make the seccomp profile from ${source}: ${error.message}`);
  console.error('set FORGE_SECCOMP_BASE to a copy of your engine\'s default profile (moby profiles/seccomp/default.json)');
  process.exit(1);
});
NODE
  echo "init-secrets: wrote $seccomp_file from $base"
fi

echo "init-secrets: done. Mint a token with: npx forge token mint --key $out/keys/token.key --sub <agent> --ttl 3600"
