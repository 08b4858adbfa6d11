#!/bin/sh
# The 1 GiB hostile inputs of issue #42, run by hand against a built
# collbench (bench/results/hostile-input.md): time, max RSS, exit code
# and the first stderr line of each. Needs GNU time and ~5 GiB in $DIR.
# Usage: bench/hostile-input.sh [path/to/collbench] [scratch dir]
set -u
BIN=${1:-target/debug/collbench}
BIN=$(realpath "$BIN")
DIR=${2:-/tmp/collbench-hostile}
mkdir -p "$DIR" && cd "$DIR" || exit 1
GIB=1073741824
cat > in.txt <<'LOG'
# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1     9.63    0.00    0.00       0     0.92    0.01    0.01       0
          16             4     float     sum      -1     0.88    0.02    0.02       0     0.80    0.02    0.02       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.0212754
LOG
info='node-a:1378:1402 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read'
[ -f junk1g.txt ] || { cat in.txt; yes junk | head -c $GIB; } > junk1g.txt
[ -f line1g.txt ] || { cat in.txt; head -c $GIB /dev/zero | tr '\0' x; } > line1g.txt
[ -f tuner1g.csv ] || head -c $GIB /dev/urandom | base64 -w 76 | head -c $GIB > tuner1g.csv
[ -f json1g.json ] || { printf '{"version":3,"results":['; yes '{"out_of_place":{}},' | head -c $GIB; } > json1g.json
# Whole INFO lines (80 bytes each): 1 GiB, and 48 MiB (under the bound).
[ -f info1g.txt ] || { head -1 in.txt; yes "$info" | head -n 13421772; tail -n +2 in.txt; } > info1g.txt
[ -f info48m.txt ] || { head -1 in.txt; yes "$info" | head -n 629145; tail -n +2 in.txt; } > info48m.txt
rm -rf loop && mkdir loop && cp in.txt loop/ && ln -s . loop/self && mkfifo loop/fifo

one() { # label, shell command
    /usr/bin/time -f '%e %M' -o time.txt sh -c "$2" > /dev/null 2> err.txt
    rc=$?
    set -- "$1" "$(tail -1 time.txt)" "$(head -1 err.txt | cut -c1-160)" "$(wc -l < err.txt)"
    echo "| $1 | ${2% *} s | $(( ${2#* } / 1024 )) MB | $rc | $4 | $3 |"
}
echo "| case | time | max RSS | exit | stderr lines | first stderr line |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
one "1 GiB of junk after a valid header" "$BIN report junk1g.txt"
one "the same, --input-format nccl-tests" "$BIN report --input-format nccl-tests junk1g.txt"
one "one 1 GiB line after a valid header" "$BIN report line1g.txt"
one "(header; yes junk) on stdin" "(cat in.txt; yes junk) | $BIN report /dev/stdin"
one "1 GiB JSON" "$BIN report json1g.json"
one "1 GiB valid log (header, NCCL INFO lines, table)" "$BIN report info1g.txt"
one "48 MiB valid log (same, under the 64 MiB bound)" "$BIN report info48m.txt"
one "compare of two 1 GiB junk logs" "$BIN compare junk1g.txt junk1g.txt"
one "check --baseline /dev/zero" "$BIN check --backend cpu --baseline /dev/zero"
one "run --tuner-config /dev/zero" "$BIN run all_reduce --backend cpu --tuner-config /dev/zero"
one "run --tuner-config of 1 GiB base64 junk" "$BIN run all_reduce --tuner-config tuner1g.csv"
one "the first 1 MiB of it" "head -c 1000000 tuner1g.csv > t1m.csv; $BIN run all_reduce --tuner-config t1m.csv"
one "report --matrix /dev/zero" "$BIN report in.txt -o r.html --force --matrix /dev/zero"
one "folder with ln -s . self and a FIFO" "$BIN report loop"
