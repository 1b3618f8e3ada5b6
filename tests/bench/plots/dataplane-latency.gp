# data: dataplane-size.dat
# Read latency through a grant (rdmactl bench read, depth 1, p50) over perftest's ib_read_lat (typical), by size,
# between the two guests, beside the goal (at most 1.1x). Data: tests/bench/run-grant-bench.sh (means over the
# rounds). The title carries the date of the data file (the run's).
set terminal pngcairo size 800,500 noenhanced
set output out
date = system(sprintf("date -u -r '%s' +%%Y-%%m-%%d 2>/dev/null", in))
set title sprintf("Read latency through a grant / ib_read_lat, depth 1 (two Soft-RoCE guests)\nmeasured %s", date)
set logscale x
set xlabel "read size"
set ylabel "ratio (1 = perftest)"
set yrange [0:2]
set grid
set xtics ("64 B" 64, "4 KiB" 4096, "64 KiB" 65536, "1 MiB" 1048576)
set xrange [32:2097152]
set key bottom right box opaque
plot in using 1:($3/$2) with linespoints lw 2 pt 7 title "rdmactl bench read p50 / ib_read_lat typical", \
     1.1 with lines dashtype 2 lc rgb "red" title "goal: at most 1.1", \
     1 with lines dashtype 3 lc rgb "gray" notitle
