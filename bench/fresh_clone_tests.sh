#!/usr/bin/env bash
# Issue #42's last bar: `cargo test --no-fail-fast` (the README's test
# command, with every failure shown) on a fresh clone, $ROUNDS times in a
# row on a quiet machine and $ROUNDS times with `stress --cpu 2` (Debian's
# stress) beside it. One line per round: passed, failed, ignored, seconds;
# the failing tests' names under it. Usage:
#   bash bench/fresh_clone_tests.sh [REPO] [DEST]   (ROUNDS=3)
set -u
REPO=$(realpath "${1:-.}"); DEST=${2:-$(dirname "$REPO")/fresh-clone}
ROUNDS=${ROUNDS:-3}; LOG=${LOG:-$DEST.log}
rm -rf "$DEST" && git clone -q "$REPO" "$DEST" && cd "$DEST" || exit 2
echo "# $(git log --oneline -1) on $(nproc) cores, $(date -u +%FT%TZ)" | tee "$LOG"
round() { # round NAME
  local s out rc; s=$(date +%s)
  out=$(cargo test --no-fail-fast 2>&1); rc=$?
  local p f i
  p=$(grep -o '[0-9]* passed' <<<"$out" | awk '{s+=$1} END {print s+0}')
  f=$(grep -o '[0-9]* failed' <<<"$out" | awk '{s+=$1} END {print s+0}')
  i=$(grep -o '[0-9]* ignored' <<<"$out" | awk '{s+=$1} END {print s+0}')
  echo "$1: rc=$rc passed=$p failed=$f ignored=$i $(( $(date +%s) - s )) s" | tee -a "$LOG"
  grep -E '^    [a-z_0-9:]+$|^test .* FAILED$' <<<"$out" | sort -u | sed 's/^/  /' | tee -a "$LOG"
}
for r in $(seq "$ROUNDS"); do round "quiet $r"; done
for r in $(seq "$ROUNDS"); do
  stress --cpu 2 > /dev/null 2>&1 & sp=$!
  round "stress --cpu 2, $r"
  pkill -P "$sp"; kill "$sp"; wait "$sp" 2>/dev/null
done
