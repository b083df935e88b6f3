#!/usr/bin/env bash
# Timing measurements for issue 14, run on the quiet machine, one after another.
cd /work/main
PY=.venv/bin/python
O=/work/quiet
log() { echo "$(date -u +%H:%M:%S) $*" >> $O/progress.log; }
lscpu | grep -E "Model name|CPU family|Model:|Stepping|^CPU\(s\)" > $O/machine.txt; date -u >> $O/machine.txt
uptime >> $O/machine.txt
cmp() { name=$1; shift; log "compare $name: $*"; $PY -m autotune compare "$@" --json --results $O/cmp-res > $O/cmp-$name.json 2> $O/cmp-$name.err; log "  rc $? $(uptime)"; }
cmp multiproc --a nproc=2 --a threads=1 --b nproc=1 --b threads=2 --rounds 6 --seconds 3
cmp bf16 --a precision=bf16 --b precision=fp32 --set threads=2 --rounds 6 --seconds 3
cmp tcmalloc --a allocator=tcmalloc --b allocator=default --set threads=2 --rounds 6 --seconds 3
cmp jemalloc --a allocator=jemalloc --b allocator=default --set threads=2 --rounds 6 --seconds 3
cmp iomp --a omp_runtime=libiomp5 --b omp_runtime=libgomp --set threads=2 --set binding=taskset --rounds 6 --seconds 3
cmp kmpbt --a kmp_blocktime=1 --b kmp_blocktime=200 --set omp_runtime=libiomp5 --set threads=2 --set binding=taskset --rounds 4 --seconds 3
cmp numactl --a binding=numactl --b binding=none --set threads=2 --rounds 6 --seconds 3
log "speedup"
$PY -m benchmarks.speedup --set nproc=2 --set threads=1 --set binding=numactl --set allocator=tcmalloc --set omp_runtime=libiomp5 --set global_batch=64 --set precision=bf16 --rounds 8 --no-oracle --workdir $O/speedup-work > $O/speedup.out 2> $O/speedup.err
log "  rc $? $(uptime)"
log "overhead"
$PY -m benchmarks.overhead --repeats 10 --seconds 5 > $O/overhead.out 2> $O/overhead.err
log "  rc $? $(uptime)"
IPY=$HOME/.cache/autotune/venv-intel-23737173ee54/bin/python
if [ -x "$IPY" ]; then
  log "intel_ab ipex"
  $PY -m benchmarks.intel_ab --python "$IPY" --a ipex=on --b ipex=off --set precision=bf16 --set threads=2 --rounds 3 --json > $O/ipex.out 2> $O/ipex.err
  log "  rc $? $(uptime)"
fi
log "done"
