#!/usr/bin/env bash
# Runs a command longer than one device call (600 s at most). Started in a
# session of its own (setsid), it outlives the call and runs on while the
# machine is held. The next call, made within the machine's 30 s warm time,
# waits for it and brings its results back. $OUT is emptied before every
# call, so the command gets /tmp/detached/NAME as its OUT.
#
#   bench/detach.sh start NAME CMD [ARG ...]
#       starts CMD with OUT=/tmp/detached/NAME; returns at once
#   bench/detach.sh wait NAME SECONDS
#       waits up to SECONDS for it to end, then copies its *.tgz, run.log
#       and rc into $OUT (where set); exit 0 once it has ended, 3 while it
#       still runs
#
# Issue 23's search with its own 10-minute budget, in two calls:
#   call 1: bench/detach.sh start tune env TUNE_BUDGET=10m EMU_BUDGET=9999 \
#             bash bench/emu.sh ntbuild tune; bench/detach.sh wait tune 580
#   call 2: bench/detach.sh wait tune 300 && OUT=/tmp/detached/tune \
#             bash bench/emu.sh tunerepro; cp /tmp/detached/tune/emu.tgz $OUT/
# Later stages given OUT=/tmp/detached/NAME find the earlier ones' files
# (tunerepro reads tune/winner.sh and tune/tune.json). Start nothing else
# that uses MPS while a detached emu.sh runs: each emu.sh starts and stops
# it.
set -u
cmd=${1:-}; name=${2:-}
[ -n "$cmd" ] && [ -n "$name" ] || { sed -n '2,23p' "$0" >&2; exit 2; }
dir=/tmp/detached/$name
case $cmd in
  start)
    shift 2
    [ $# -gt 0 ] || { echo "detach.sh: start $name needs a command" >&2; exit 2; }
    if [ -f "$dir/pid" ] && [ ! -f "$dir/rc" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "detach.sh: $name is still running (pid $(cat "$dir/pid"))" >&2; exit 2
    fi
    rm -rf "$dir"; mkdir -p "$dir"
    date +%s > "$dir/started"
    setsid bash -c 'export OUT="$1"; shift; "$@"; echo $? > "$OUT/rc"' detach "$dir" "$@" \
      > "$dir/run.log" 2>&1 < /dev/null &
    echo $! > "$dir/pid"
    echo "detach.sh: $name started (pid $!), output under $dir"
    ;;
  wait)
    limit=${3:-0}
    [ -d "$dir" ] || { echo "detach.sh: nothing named $name was started here" >&2; exit 2; }
    end=$(( $(date +%s) + limit ))
    while [ ! -f "$dir/rc" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 1; done
    ran=$(( $(date +%s) - $(cat "$dir/started") ))
    if [ -n "${OUT:-}" ] && [ "$OUT" != "$dir" ]; then
      mkdir -p "$OUT"
      cp "$dir"/*.tgz "$dir/run.log" "$OUT"/ 2>/dev/null
      [ -f "$dir/rc" ] && cp "$dir/rc" "$OUT/"
    fi
    if [ -f "$dir/rc" ]; then
      echo "detach.sh: $name ended, rc=$(cat "$dir/rc"), ${ran} s after its start"
    else
      echo "detach.sh: $name still runs, ${ran} s after its start"; exit 3
    fi
    ;;
  *) echo "detach.sh: unknown command '$cmd' (start or wait)" >&2; exit 2 ;;
esac
