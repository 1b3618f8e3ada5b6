# scale_bench: each operation's p50 (solid) and p99 (dashed) with N issued grants in rdmad, over the same figure at the
# smallest N of the run (1 = flat). Input: scale-grants.dat from run-scale-bench.sh (RDMAD_BENCH_RESULTS): column 1
# the count, then p50 and p99 in microseconds per operation, in the order of 'names' below. The title carries the
# date of the data file (the run's).
# Usage: gnuplot -e "in='scale-grants.dat'; out='scale-grants.png'" tests/bench/plots/scale-grants.gp
if (!exists("in")) in = 'scale-grants.dat'
if (!exists("out")) out = 'scale-grants.png'
names = "ListPds(no-op) IssueGrant RevokeGrant GetGrant ListGrants(principal) ListGrants(MR:all-N)"
set terminal pngcairo size 800,500 noenhanced
set output out
date = system(sprintf("date -u -r '%s' +%%Y-%%m-%%d 2>/dev/null", in))
set title sprintf("rdmad with N issued grants: cost / cost at the smallest N\n(solid p50, dashed p99), measured %s", date)
n = words(names)
array first[2*n+1]
do for [c=2:2*n+1] { stats in every ::0::0 using c nooutput; first[c] = STATS_min }
set xlabel "grants in rdmad (log)"
set ylabel "ratio (1 = flat; log)"
set logscale xy
set xrange [*:*] noextend
set key outside right top font ",8"
set grid
plot for [k=1:n] in using 1:(column(2*k)/first[2*k]) with linespoints lt k lw 2 pt 7 title word(names, k)." p50", \
     for [k=1:n] in using 1:(column(2*k+1)/first[2*k+1]) with linespoints lt k dt 2 pt 6 notitle
