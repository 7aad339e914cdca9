#!/usr/bin/env bash
# On the CPU machine, from the repository root: turn helper requests into .ext/br/<request>/{patch,run.sh}.
#   bash scripts/device/round.sh rK [REQ_DIR]      (REQ_DIR default /work/briefs/req)
# A request NAME_rK is NAME_rK.sh (run in the patched tree on the GPU, $OUT its output folder), NAME_rK.commit
# (the helper's commit: its diff against the merge-base with main, bench/results and docs/ left out) and
# NAME_rK.max (seconds). Each patch is checked against `git archive HEAD`. Prints the items for call.sh.
set -uo pipefail
k=$1; req=${2:-/work/briefs/req}
root=$(git rev-parse --show-toplevel)
cd "$root"
rm -rf .ext/br; mkdir -p .ext/br
chk=$(mktemp -d); git archive HEAD | tar xf - -C "$chk"
items=""
for sh in "$req"/*_"$k".sh; do
  [ -f "$sh" ] || continue
  name=$(basename "$sh" .sh)
  [ -f "$req/$name.commit" ] || { echo "$name: no .commit file" >&2; continue; }
  commit=$(tr -d ' \n' < "$req/$name.commit")
  max=$(cat "$req/$name.max" 2>/dev/null || echo 140)
  base=$(git merge-base main "$commit")
  mkdir -p .ext/br/$name
  git diff --binary "$base" "$commit" -- . ':!bench/results' ':!docs' > .ext/br/$name/patch
  cp "$sh" .ext/br/$name/run.sh
  if (cd "$chk" && git apply --allow-empty --check "$root/.ext/br/$name/patch"); then
    echo "$name: patch ok ($(wc -c < .ext/br/$name/patch) bytes, base ${base:0:8})" >&2
    items="$items $name:$max"
  else
    echo "$name: PATCH DOES NOT APPLY to HEAD" >&2; rm -rf .ext/br/$name
  fi
done
rm -rf "$chk"
echo $items
