# data: dataplane-size.dat
# Read rate through a grant (rdmactl bench read) over perftest's ib_read_bw at depth 1 and 16, by size, between
# the two guests, beside the goal (at least 0.95x). Data: tests/bench/run-grant-bench.sh (means over the rounds).
# The title carries the date of the data file (the run's).
set terminal pngcairo size 800,500 noenhanced
set output out
date = system(sprintf("date -u -r '%s' +%%Y-%%m-%%d 2>/dev/null", in))
set title sprintf("Read rate through a grant / ib_read_bw (two Soft-RoCE guests)\nmeasured %s", date)
set logscale x
set xlabel "read size"
set ylabel "ratio (1 = perftest)"
set yrange [0:2]
set grid
set xtics ("64 B" 64, "4 KiB" 4096, "64 KiB" 65536, "1 MiB" 1048576)
set xrange [32:2097152]
set key bottom right box opaque
plot in using 1:($5/$4) with linespoints lw 2 pt 7 title "rdmactl bench read / ib_read_bw, depth 1", \
     in using 1:($7/$6) with linespoints lw 2 pt 5 title "rdmactl bench read / ib_read_bw, depth 16", \
     0.95 with lines dashtype 2 lc rgb "red" title "goal: at least 0.95", \
     1 with lines dashtype 3 lc rgb "gray" notitle
