#!/usr/bin/env bash
# Offline checks of deploy/: the compose file against the Compose Specification's schema,
# the Kubernetes manifests against the API's schemas, every YAML and the dashboard JSON
# parsed, and `docker compose config` / `kubectl kustomize` where those tools exist. The
# schema checkers come from PyPI into a throwaway virtualenv (DEPLOY_CHECK_VENV to reuse).
set -euo pipefail
cd "$(dirname "$0")/../deploy"
venv=${DEPLOY_CHECK_VENV:-$(mktemp -d)/venv}
[[ -x "$venv/bin/check-jsonschema" ]] || {
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q check-jsonschema kubernetes-validate pyyaml
}
echo "== compose spec schema"
"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec docker-compose.yml
if docker compose version >/dev/null 2>&1; then
  echo "== docker compose config"; docker compose config -q && echo ok
else
  echo "== docker compose config: no compose plugin here (skipped)"
fi
echo "== kubernetes schemas"
for f in k8s/secret.yaml k8s/pvc.yaml k8s/deployment.yaml k8s/service.yaml; do
  "$venv/bin/kubernetes-validate" --strict -k "${K8S_VERSION:-1.32.0}" "$f"
done
if command -v kubectl >/dev/null 2>&1; then
  echo "== kubectl kustomize"; kubectl kustomize k8s >/dev/null && echo ok
fi
echo "== YAML and JSON parse"
"$venv/bin/python" - <<'PY'
import glob, json, yaml
for f in glob.glob("**/*.y*ml", recursive=True):
    list(yaml.safe_load_all(open(f)))
json.load(open("grafana/dashboards/kiln.json"))
print("ok")
PY
