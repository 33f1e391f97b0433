#!/usr/bin/env bash
# check-layers.sh: the layering rules of the code (make verify;
# docs/development.md, "Layout"), read from the packages' own imports
# (go list, tests included):
#
#   1. api is the floor: it imports no other module of this repository.
#   2. The programs (manager, provisioner, hostdefiner) stand side by side
#      on it: each imports api and itself only, never another program.
#   3. e2e imports api only; tools imports api and e2e (its framework).
#   4. Inside a program, internal/app (flags, config, wiring) is the top:
#      only cmd/ and internal/app itself import internal/app/... (the code
#      the programs run; a test may use the real cache transform of
#      internal/app/cachetrim to build what the informers keep).
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0

allowed() {
  case $1 in
    api) echo "api" ;;
    manager | provisioner | hostdefiner) echo "api $1" ;;
    e2e) echo "api e2e" ;;
    tools) echo "api e2e tools" ;;
    *) echo "check-layers: module $1 has no rule" >&2; return 1 ;;
  esac
}

for m in api manager provisioner hostdefiner e2e tools; do
  ok=$(allowed "$m")
  # Two lines a package of m: its imports in the code it runs ("prod";
  # a *test package counts as test code) and its tests' imports ("test").
  while read -r pkg prod imports; do
    for imp in ${imports//,/ }; do
      case $imp in hostpath.dev/*) ;; *) continue ;; esac
      mod=${imp#hostpath.dev/}
      mod=${mod%%/*}
      if ! [[ " $ok " == *" $mod "* ]]; then
        echo "$pkg imports $imp: module $m may import only: $ok"
        bad=1
      fi
      [ "$prod" = prod ] || continue
      case $imp in
        hostpath.dev/$m/internal/app | hostpath.dev/$m/internal/app/*)
          case $pkg in
            hostpath.dev/$m/cmd/* | hostpath.dev/$m/internal/app | hostpath.dev/$m/internal/app/*) ;;
            *) echo "$pkg imports $imp: only cmd/ and internal/app import internal/app (the top of $m)"; bad=1 ;;
          esac
          ;;
      esac
    done
  done < <(cd "$m" && go list -f '{{.ImportPath}} prod {{join .Imports ","}}
{{.ImportPath}} test {{join .TestImports ","}},{{join .XTestImports ","}}' ./... |
    awk '$1 ~ /test$/ { $2 = "test" } { print }')
done
[ $bad -eq 0 ] || { echo "check-layers: imports against the layers (above)"; exit 1; }
echo "check-layers: ok"
