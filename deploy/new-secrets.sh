#!/bin/sh
# Writes the secrets docker-compose.yml needs, once, next to it:
#   .env                             database passwords and the current encryption key id
#   secrets/SAS_ENCRYPTION__KEYS     the payload encryption keys, {"k1": "<base64 of 32 random bytes>"}
# An existing file is never overwritten (a new key would make the history written with
# the old one unreadable). Needs only a POSIX shell, base64 and /dev/urandom.
set -eu

cd "${1:-$(dirname "$0")/..}"

random() { head -c "$1" /dev/urandom | base64 | tr -d '\n'; }
# URL-safe (the passwords go into database URLs): base64 with - and _, no padding.
password() { random 24 | tr '+/' '-_' | tr -d '='; }

umask 077
if [ -e .env ]; then
    echo "new-secrets: .env exists, left as it is"
else
    cat > .env <<ENV
# Written by deploy/new-secrets.sh; never commit this file.
POSTGRES_PASSWORD=$(password)
TEMPORAL_DB_PASSWORD=$(password)
MIGRATE_DB_PASSWORD=$(password)
APP_DB_PASSWORD=$(password)
ENCRYPTION_CURRENT_KEY_ID=k1
ENV
    echo "new-secrets: wrote .env"
fi

# The directory is private (700); the key file in it is 644 because Compose bind-mounts a
# file secret with its host owner and mode, and the containers run as another user.
mkdir -p secrets
chmod 700 secrets
if [ -e secrets/SAS_ENCRYPTION__KEYS ]; then
    echo "new-secrets: secrets/SAS_ENCRYPTION__KEYS exists, left as it is"
else
    printf '{"k1": "%s"}\n' "$(random 32)" > secrets/SAS_ENCRYPTION__KEYS
    chmod 644 secrets/SAS_ENCRYPTION__KEYS
    echo "new-secrets: wrote secrets/SAS_ENCRYPTION__KEYS (key k1)"
fi
