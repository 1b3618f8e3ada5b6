# data: dataplane-size.dat
# Read latency through a grant (rdmactl bench read, depth 1, p50) against perftest's ib_read_lat (typical),
# between the two guests. Data: tests/bench/run-grant-bench.sh.
set terminal pngcairo size 800,500
set output out
set title "RDMA read latency against size, depth 1 (two Soft-RoCE guests)"
set logscale xy
set xlabel "read size (bytes)"
set ylabel "latency (us)"
set grid
set xtics ("64 B" 64, "4 KiB" 4096, "64 KiB" 65536, "1 MiB" 1048576)
set xrange [32:2097152]
set key top left box opaque
plot in using 1:2 with linespoints title "ib\\_read\\_lat (typical)", \
     in using 1:3 with linespoints title "rdmactl bench read through a grant (p50)"
