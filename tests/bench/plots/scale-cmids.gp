# scale_bench (issue 9): per-operation latency against the number of CM ids rdmad holds, p50 (solid) and p99
# (dashed), both axes log. Input: scale-cmids.dat from run-scale-bench.sh (RDMAD_BENCH_RESULTS): column 1 the
# count, then p50 and p99 in microseconds per operation, in the order of 'names' below.
# Usage: gnuplot -e "in='scale-cmids.dat'; out='scale-cmids.png'" tests/bench/plots/scale-cmids.gp
if (!exists("in")) in = 'scale-cmids.dat'
if (!exists("out")) out = 'scale-cmids.png'
names = "ListPds(no-op) CreateCmId DeleteCmId GetCmId MigrateCmId ListCmIds(other-channel) GetChannel(all-N)"
set terminal pngcairo size 800,500
set output out
set title "rdmad with N CM ids: cost per operation (solid: p50, dashed: p99)"
set xlabel "CM ids in rdmad (log)"
set ylabel "latency, ms (log)"
set logscale xy
set key outside right top font ",8"
set grid
n = words(names)
plot for [k=1:n] in using 1:(column(2*k)/1000) with linespoints lt k lw 2 pt 7 title word(names, k)." p50", \
     for [k=1:n] in using 1:(column(2*k+1)/1000) with linespoints lt k dt 2 pt 6 notitle
