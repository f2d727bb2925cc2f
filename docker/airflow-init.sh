#!/usr/bin/env bash
# One-shot init of the dev stack (the `airflow-init` service): migrate Airflow's
# metadata DB, create the admin user, and make the onceflow state directories.
#
# The stack uses Airflow's SimpleAuthManager: users come from
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS and their passwords from the JSON file
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE. Creating the admin user means
# writing its password, taken from docker/.env, into that file (on a volume the
# api-server mounts), so the login is the one in .env and never a generated one.
set -euo pipefail

fail() { echo "airflow-init: $*" >&2; exit 1; }

: "${AIRFLOW_ADMIN_USER:?is not set. Fix: set it in docker/.env (see docker/.env.example)}"
: "${AIRFLOW_ADMIN_PASSWORD:?is not set. Fix: set it in docker/.env (see docker/.env.example)}"
: "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?is not set. Fix: keep it in docker/compose.yaml}"
: "${ONCEFLOW_HOME:?is not set. Fix: keep it in docker/compose.yaml}"

case ",${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-}," in
  *",${AIRFLOW_ADMIN_USER}:admin,"*) ;;
  *) fail "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS (${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-unset}) does not make ${AIRFLOW_ADMIN_USER} an admin. Fix: set it to ${AIRFLOW_ADMIN_USER}:admin" ;;
esac

echo "airflow-init: migrating the metadata database"
airflow db migrate

echo "airflow-init: writing the password of ${AIRFLOW_ADMIN_USER}"
passwords_file="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE}"
mkdir -p "$(dirname "$passwords_file")"
python - <<'PY'
import json, os

path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
user, password = os.environ["AIRFLOW_ADMIN_USER"], os.environ["AIRFLOW_ADMIN_PASSWORD"]
try:
    with open(path) as f:
        passwords = json.load(f)
except (OSError, ValueError):
    passwords = {}
passwords[user] = password
with open(path, "w") as f:
    json.dump(passwords, f)
    f.write("\n")
os.chmod(path, 0o600)
PY

echo "airflow-init: state directories under ${ONCEFLOW_HOME}"
mkdir -p "${ONCEFLOW_HOME}/tables" "${ONCEFLOW_HOME}/checkpoints" "${ONCEFLOW_HOME}/reports" \
         "${ONCEFLOW_HOME}/pipelines"

echo "airflow-init: done"
