#!/usr/bin/env bash
# bench-clone.sh: how long cloning a volume takes by each method of volume
# clones, on this machine (no cluster needed; run as root).
#
#   scripts/bench-clone.sh [-r ROUNDS] [-b BYTES]
#
# Runs manager/internal/clone's BenchmarkClone: a source volume of BYTES
# (default 1 GiB, in files of 4 MiB, 16 per directory) cloned ROUNDS times
# (default 5) by each method, the methods of a filesystem taking turns:
#   - btrfs (a loop-mounted image with simple quotas, as a pool that
#     enforces sizes): snapshot (quota.Snapshotter), reflink (clone.Contents:
#     FICLONE per file), read-write (Contents with NoReflink: a byte copy);
#   - xfs (a loop-mounted image, reflink=1): reflink, read-write;
#   - the host filesystem of the temporary directory (TMPDIR, /tmp):
#     copy_file_range (what Contents does where files cannot share
#     extents), read-write.
# Each clone goes into a new volume made by the pool's enforcer, ends with
# syncfs, and reads a source evicted from the page cache; its removal is
# not timed. Prints, per filesystem and method, the median, fastest and
# slowest time, the median throughput, and the median as a ratio of the
# median of read-write on the same filesystem (the baseline; below 1 is
# faster). Loop images (3 GiB for 1 GiB, sparse) live in the temporary
# directory and are unmounted (their loop devices detached) at the end.
#
# Environment: ROUNDS, BYTES (as the flags), TMPDIR.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
BYTES=${BYTES:-$((1 << 30))}
while [ $# -gt 0 ]; do
  case $1 in
  -r | --rounds) ROUNDS=${2:?-r needs a number}; shift 2 ;;
  -b | --bytes) BYTES=${2:?-b needs a number}; shift 2 ;;
  *) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "loop-mounting btrfs and xfs images needs root"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "Building the clone benchmark"
(cd "$REPO_ROOT/manager" && go test -c -o "$work/clone.test" ./internal/clone)

log "Cloning $BYTES bytes, $ROUNDS rounds (kernel $(uname -r), $(nproc) CPUs, temporary directory on $(findmnt -n -o FSTYPE -T "${TMPDIR:-/tmp}"))"
(cd "$REPO_ROOT/manager/internal/clone" &&
  CLONE_BENCH_BYTES=$BYTES CLONE_BENCH_ROUNDS=$ROUNDS "$work/clone.test" \
    -test.run '^$' -test.bench '^BenchmarkClone$' -test.benchtime 1x -test.timeout 2h) |
  tee "$work/out.txt" >&2

# Samples: "FS/METHOD NS", sorted by name and time.
sed -n 's#^BenchmarkClone/\([^ \t#]*\)\(\#[0-9]*\)\{0,1\}-[0-9]*[ \t]\{1,\}[0-9]\{1,\}[ \t]\{1,\}\([0-9]\{1,\}\) ns/op.*#\1 \3#p' "$work/out.txt" |
  sort -k1,1 -k2,2n > "$work/samples.txt"
[ -s "$work/samples.txt" ] || die "no samples in the benchmark's output"

awk -v bytes="$BYTES" '
  { n[$1]++; v[$1, n[$1]] = $2 }
  END {
    for (k in n) {
      c = n[k]
      med[k] = (c % 2) ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2
    }
    printf "%-28s %5s %10s %10s %10s %10s %14s\n", "filesystem/method", "runs", "median s", "min s", "max s", "MiB/s", "x read-write"
    for (k in n) keys[++nk] = k
    for (i = 1; i <= nk; i++) for (j = i + 1; j <= nk; j++) if (keys[j] < keys[i]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
    for (i = 1; i <= nk; i++) {
      k = keys[i]; split(k, p, "/"); base = p[1] "/read-write"
      ratio = (base in med) ? sprintf("%.4f", med[k] / med[base]) : "-"
      printf "%-28s %5d %10.3f %10.3f %10.3f %10.0f %14s\n", k, n[k], med[k] / 1e9, v[k, 1] / 1e9, v[k, n[k]] / 1e9, bytes / 1048576 / (med[k] / 1e9), ratio
    }
  }' "$work/samples.txt"
