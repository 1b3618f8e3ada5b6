# scale_bench (issue 9): throughput against the number of concurrent clients (threads, each with its own gRPC
# connection to rdmad). Input: scale-clients.dat from run-scale-bench.sh (RDMAD_BENCH_RESULTS): clients,
# no-op ListPds per second, RegisterMr 4 KiB + DeregisterMr pairs per second.
# Usage: gnuplot -e "in='scale-clients.dat'; out='scale-clients.png'" tests/bench/plots/scale-clients.gp
if (!exists("in")) in = 'scale-clients.dat'
if (!exists("out")) out = 'scale-clients.png'
set terminal pngcairo size 800,500
set output out
set title "rdmad with concurrent clients: throughput"
set xlabel "concurrent clients (log)"
set ylabel "operations per second"
set logscale x
set yrange [0:*]
set key top left
set grid
plot in using 1:2 with linespoints lw 2 pt 7 title "ListPds (no-op) per s", \
     in using 1:3 with linespoints lw 2 pt 7 title "RegisterMr 4 KiB + DeregisterMr pairs per s"
