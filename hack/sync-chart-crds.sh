#!/usr/bin/env bash
# Copy the generated CRDs (api/*.yaml, written by `make crds`) into the Helm chart.
#
# Helm installs everything under charts/kqueue/crds/ before the templates and never upgrades or
# deletes it, which is the behaviour CRDs need (deleting a CRD deletes every object of its kind).
# The copies must stay byte for byte equal to api/; tests/chart/test_crds_sync.py checks that.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/api"
dst="$root/charts/kqueue/crds"
mkdir -p "$dst"
# Remove copies of CRDs that no longer exist, so a renamed kind does not linger in the chart.
for f in "$dst"/*.yaml; do
  [ -e "$f" ] || continue
  [ -e "$src/$(basename "$f")" ] || { rm -f "$f"; echo "removed $f"; }
done
for f in "$src"/*.yaml; do
  target="$dst/$(basename "$f")"
  if ! cmp -s "$f" "$target"; then
    cp "$f" "$target"
    echo "wrote $target"
  fi
done
