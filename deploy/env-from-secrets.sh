#!/bin/sh
# Entrypoint of the sas containers: every Docker secret whose file name is a sas setting
# (/run/secrets/SAS_ENCRYPTION__KEYS, ...) becomes that environment variable, then the
# command runs. The value lives in a file mounted into this container only, not in the
# compose file, the image or `docker inspect`.
set -eu

dir="${SAS_SECRETS_DIR:-/run/secrets}"
if [ -d "$dir" ]; then
    for file in "$dir"/SAS_*; do
        [ -f "$file" ] || continue
        name="${file##*/}"
        case "$name" in
            *[!A-Za-z0-9_]*) echo "env-from-secrets: skipping $name: not a variable name" >&2; continue ;;
        esac
        # $(...) drops the file's trailing newlines, as settings expect.
        value="$(cat "$file")"
        export "$name=$value"
    done
fi
exec "$@"
