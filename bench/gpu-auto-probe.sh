export NCCL_NVLS_ENABLE=0
B=dist/collbench; O=$OUT/a; mkdir -p $O
w() { local n=$1; shift; local s=$(date +%s.%N); "$@" > $O/$n.txt 2> $O/$n.err; echo "$n rc=$? $(python3 -c "print(round($(date +%s.%N)-$s,2))") s" | tee -a $O/wall.txt; }
for r in 1 2; do
  w big_n20_$r $B run all_reduce -b 1G -e 8G -f 2 -w 5 -n 20 -g 1 --output $O/big_n20_$r.json
  w big_auto_$r $B run all_reduce -b 1G -e 8G -f 2 -w 5 -n auto -g 1 --output $O/big_auto_$r.json
  w sw_auto_$r $B run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv -b 8 -e 8G -f 2 -w 5 -n auto -g 1 --output $O/sw_auto_$r.json
  w sw_n20_$r $B run all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv -b 8 -e 8G -f 2 -w 5 -n 20 -g 1 --output $O/sw_n20_$r.json
  w one_$r $B run all_reduce -b 8 -e 8 -w 5 -n 20 -g 1
done
cd $OUT && tar czf a.tgz a && rm -rf a
