#!/usr/bin/env bash
# ctest k8s_manifests: the Kubernetes manifests of deploy/kubernetes are
# valid against the Kubernetes schemas, checked OFFLINE. No cluster, and
# nothing is applied anywhere. The schemas come from the npm package
# kubernetes-models, pinned in deploy/kubernetes/validate/package-lock.json
# and installed with `npm ci` into deploy/kubernetes/validate/node_modules
# (gitignored). npm is the only thing that reaches the network.
#
# It then shows that the validator can fail: copies of a manifest with a
# deliberate mistake each must be rejected, naming the field.
#
# Usage: tests/k8s_manifests_test.sh [REPO_ROOT]
# Exit 0: all passed. 1: a failure. 77: skipped (no node/npm on PATH;
# scripts/install-deps.sh installs them).
set -euo pipefail

root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
manifests=$root/deploy/kubernetes
validator=$manifests/validate
start=$SECONDS

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "k8s_manifests: skipped: $tool is not installed (scripts/install-deps.sh installs nodejs and npm)"
    exit 77
  fi
done

echo "k8s_manifests: npm ci in ${validator#"$root"/}"
(cd "$validator" && npm ci --no-audit --no-fund --loglevel=error)

passed=0
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$root"
echo "k8s_manifests: the manifests as they are"
if node "$validator/validate.mjs" "$manifests"; then
  passed=$((passed + 1))
else
  echo "k8s_manifests: FAILED: deploy/kubernetes does not validate (output above)"
  failed=$((failed + 1))
fi

# expect_rejected NAME FILE SED_SCRIPT EXPECTED_TEXT
# Validates a copy of FILE (next to a copy of secret.yaml, for the checks
# that read it) changed by SED_SCRIPT (sed -E). The validator must exit 1
# and print EXPECTED_TEXT (a fixed string) on a FAIL line.
expect_rejected() {
  local name=$1 file=$2 script=$3 expected=$4
  local dir=$work/$name
  mkdir -p "$dir"
  cp "$manifests/$file" "$manifests/secret.yaml" "$dir/"
  sed -E -i "$script" "$dir/$file"
  if cmp -s "$manifests/$file" "$dir/$file"; then
    echo "k8s_manifests: FAILED: $name: the sed script changed nothing in $file (update this test)"
    failed=$((failed + 1))
    return
  fi
  local out rc=0
  out=$(node "$validator/validate.mjs" "$dir" 2>&1) || rc=$?
  if [ "$rc" -eq 1 ] && grep '^FAIL' <<<"$out" | grep -qF -- "$expected"; then
    echo "k8s_manifests: rejected as it should be ($name): $(grep -F -- "$expected" <<<"$out" | head -1)"
    passed=$((passed + 1))
  else
    echo "k8s_manifests: FAILED: $name: expected exit 1 and a FAIL line with \"$expected\"; got exit $rc:"
    echo "$out"
    failed=$((failed + 1))
  fi
}

echo "k8s_manifests: copies with a deliberate mistake each"
# A wrong type (the schema says integer).
expect_rejected replicas-string server-statefulset.yaml \
  's/^  replicas: 1$/  replicas: "two"/' \
  '/spec/replicas: must be integer'
# A field the container schema does not have (strict field validation).
expect_rejected unknown-container-field server-statefulset.yaml \
  's/^( +)image: drover:0\.1\.0$/&\n\1imagePullPolicyy: Always/' \
  '/spec/template/spec/containers/0/imagePullPolicyy: unknown field'
# A value outside an enum.
expect_rejected update-strategy worker-daemonset.yaml \
  's/^( +)type: RollingUpdate$/\1type: Rolling/' \
  '/spec/updateStrategy/type: must be one of OnDelete, RollingUpdate'
# A kind the schemas do not know.
expect_rejected unknown-kind server-statefulset.yaml \
  's/^kind: StatefulSet$/kind: StatefulSett/' \
  'unknown kind StatefulSett in apps/v1'
# A $(VAR) that Kubernetes would pass on as literal text. ($(...) is
# Kubernetes' syntax here, not the shell's.)
# shellcheck disable=SC2016
expect_rejected env-reference worker-daemonset.yaml \
  's/\$\(DROVER_FINGERPRINT\)/$(DROVER_FINGERPRNT)/' \
  '/spec/template/spec/containers/0/args/6: $(DROVER_FINGERPRNT) is not an env var'
# A key the Secret does not have.
expect_rejected secret-key server-statefulset.yaml \
  's/subPath: server-id$/subPath: server_id/' \
  'Secret drover-identity has no key "server_id"'

echo "k8s_manifests: $((SECONDS - start)) s"
echo "k8s_manifests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
