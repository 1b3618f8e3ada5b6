# scale_bench (issue 9): per-operation latency against the number of grants rdmad holds, p50 (solid) and p99
# (dashed), both axes log. Input: scale-grants.dat from run-scale-bench.sh (RDMAD_BENCH_RESULTS): column 1 the
# count, then p50 and p99 in microseconds per operation, in the order of 'names' below.
# Usage: gnuplot -e "in='scale-grants.dat'; out='scale-grants.png'" tests/bench/plots/scale-grants.gp
if (!exists("in")) in = 'scale-grants.dat'
if (!exists("out")) out = 'scale-grants.png'
names = "ListPds(no-op) IssueGrant RevokeGrant GetGrant ListGrants(principal) ListGrants(MR:all-N)"
set terminal pngcairo size 800,500
set output out
set title "rdmad with N issued grants: cost per operation (solid: p50, dashed: p99)"
set xlabel "grants in rdmad (log)"
set ylabel "latency, ms (log)"
set logscale xy
set key outside right top font ",8"
set grid
n = words(names)
plot for [k=1:n] in using 1:(column(2*k)/1000) with linespoints lt k lw 2 pt 7 title word(names, k)." p50", \
     for [k=1:n] in using 1:(column(2*k+1)/1000) with linespoints lt k dt 2 pt 6 notitle
