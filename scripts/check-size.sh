#!/usr/bin/env bash
# check-size.sh: the size rules of the code (make verify): no function
# outside tests longer than MAX_FUNC_LINES (80) lines, and no main.go longer
# than MAX_MAIN_LINES (45). Go code is gofmt-ed, so a top-level function
# starts with "func " and ends with "}" at the start of a line.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_FUNC_LINES=${MAX_FUNC_LINES:-80}
MAX_MAIN_LINES=${MAX_MAIN_LINES:-45}
bad=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  out=$(awk -v max="$MAX_FUNC_LINES" -v file="$f" '
    /^func / { name = $0; start = NR; next }
    /^}/ && start { n = NR - start + 1; if (n > max) printf "%s:%d: %d lines: %s\n", file, start, n, name; start = 0 }
  ' "$f")
  if [ -n "$out" ]; then echo "$out"; bad=1; fi
done < <(git ls-files -co --exclude-standard '*.go' | grep -v '_test\.go$' | grep -v '^\.cache/')
while IFS= read -r f; do
  [ -f "$f" ] || continue
  n=$(wc -l < "$f")
  if [ "$n" -gt "$MAX_MAIN_LINES" ]; then echo "$f: $n lines, more than $MAX_MAIN_LINES for a main"; bad=1; fi
done < <(git ls-files -co --exclude-standard '*/cmd/*/main.go')
[ $bad -eq 0 ] || { echo "check-size: functions over $MAX_FUNC_LINES lines or mains over $MAX_MAIN_LINES lines (above)"; exit 1; }
echo "check-size: ok"
