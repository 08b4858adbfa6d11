#!/usr/bin/env bash
# #43's "the README's commands give the same output": each command of the
# README that runs without a GPU or a cluster, with the previous build and
# this one, in a scratch folder each; stdout and stderr kept, measured
# figures masked (times, bandwidths, probe rates, dates, paths), then
# diffed. Prints one line per command (same / differs) and the diffs.
#   bash bench/readme_snapshot.sh PREV_BIN NEW_BIN [OUT_DIR]
set -u
O=${3:-/tmp/readme-snapshot}
rm -rf "$O"; mkdir -p "$O/bin/prev" "$O/bin/new"
# Both named collbench, as usage lines print the program's name.
cp "$1" "$O/bin/prev/collbench" && cp "$2" "$O/bin/new/collbench" || exit 2
PREV=$O/bin/prev/collbench; NEW=$O/bin/new/collbench
CMDS=(
  "run all -b 8 -e 4M -f 8"
  "run all_reduce alltoall -d all -o all -b 1K -e 1M -f 32"
  "run all --backend cpu --ranks 8 -b 8 -e 1M -f 16"
  "run all_reduce -b 8 -e 64K --format json"
  "run all -b 8 -e 64K -f 8 --output results.csv"
  "run all -b 8 -e 64K -f 8 --output results.md"
  "gen slurm --nodes 2 --gpus-per-node 8 --partition gpu"
  "gen k8s --kind jobset --nodes 2 --gpus-per-node 8 --image IMG"
  "gen mpirun --hosts h1:8,h2:8"
  "gen slurm --nodes 2 --gpus-per-node 8 --container"
  "baselines list"
  "baselines show cpu-ci"
  "check --backend cpu --ranks 2 --size 1M"
  "doctor"
  "run --help"
  "check --help"
  "report --help"
  "compare --help"
  "tune --help"
  "gen --help"
)
mask() { # figures that differ run to run, and the folder's name
  sed -E -e "s#$1#DIR#g" \
    -e 's/[0-9]+\.[0-9]+/N.N/g' -e 's/"[0-9]{4}-[0-9]{2}-[0-9]{2}T[^"]*"/"DATE"/g' \
    -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:]+Z?/DATE/g' \
    -e 's/(pid|Pid) +[0-9]+/\1 PID/g' -e 's/"pid": [0-9]+/"pid": N/g' -e 's/[0-9]+%/N%/g' -e 's/ +/ /g'
}
i=0; same=0; differ=0
for c in "${CMDS[@]}"; do
  i=$((i + 1))
  for side in prev new; do
    d="$O/$side/$i"; mkdir -p "$d"
    bin=$PREV; [ "$side" = new ] && bin=$NEW
    (cd "$d" && timeout 120 "$bin" $c > out.txt 2> err.txt; echo "exit $?" >> err.txt
     for f in results.csv results.md; do [ -f "$f" ] && cat "$f" >> out.txt; done)
    mask "$d" < "$d/out.txt" > "$d/out.masked"; mask "$d" < "$d/err.txt" > "$d/err.masked"
  done
  if diff -q "$O/prev/$i/out.masked" "$O/new/$i/out.masked" > /dev/null &&
     diff -q "$O/prev/$i/err.masked" "$O/new/$i/err.masked" > /dev/null; then
    echo "same     collbench $c"; same=$((same + 1))
  else
    echo "DIFFERS  collbench $c"; differ=$((differ + 1))
    diff "$O/prev/$i/out.masked" "$O/new/$i/out.masked" | head -20 | sed 's/^/    out /'
    diff "$O/prev/$i/err.masked" "$O/new/$i/err.masked" | head -20 | sed 's/^/    err /'
  fi
done
echo "# $same same, $differ differ ($i commands)"
