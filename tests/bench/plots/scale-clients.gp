# scale_bench: throughput against the number of concurrent clients (threads, each with its own gRPC connection to
# rdmad), over one client's (1 = no gain). Input: scale-clients.dat from run-scale-bench.sh (RDMAD_BENCH_RESULTS):
# clients, no-op ListPds per second, RegisterMr 4 KiB + DeregisterMr pairs per second. The title carries the
# date of the data file (the run's).
# Usage: gnuplot -e "in='scale-clients.dat'; out='scale-clients.png'" tests/bench/plots/scale-clients.gp
if (!exists("in")) in = 'scale-clients.dat'
if (!exists("out")) out = 'scale-clients.png'
set terminal pngcairo size 800,500 noenhanced
set output out
date = system(sprintf("date -u -r '%s' +%%Y-%%m-%%d 2>/dev/null", in))
set title sprintf("rdmad with concurrent clients: throughput / one client's (2 vCPUs)\nmeasured %s", date)
stats in every ::0::0 using 2 nooutput
noop1 = STATS_min
stats in every ::0::0 using 3 nooutput
reg1 = STATS_min
set xlabel "concurrent clients (log)"
set ylabel "ratio (1 = one client)"
set logscale x
set yrange [0:*]
set key top left
set grid
plot in using 1:($2/noop1) with linespoints lw 2 pt 7 title "ListPds (no-op)", \
     in using 1:($3/reg1) with linespoints lw 2 pt 7 title "RegisterMr 4 KiB + DeregisterMr pairs", \
     1 with lines dashtype 3 lc rgb "gray" notitle
