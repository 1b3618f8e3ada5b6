# data: dataplane-size.dat
# Read bandwidth through a grant (rdmactl bench read) against perftest's ib_read_bw at depth 1 and 16,
# between the two guests. Data: tests/bench/run-grant-bench.sh.
set terminal pngcairo size 800,500
set output out
set title "RDMA read bandwidth against size (two Soft-RoCE guests)"
set logscale xy
set xlabel "read size (bytes)"
set ylabel "MiB/s"
set grid
set xtics ("64 B" 64, "4 KiB" 4096, "64 KiB" 65536, "1 MiB" 1048576)
set xrange [32:2097152]
set key top left box opaque
plot in using 1:4 with linespoints title "ib\\_read\\_bw, depth 1", \
     in using 1:5 with linespoints title "rdmactl bench read, depth 1", \
     in using 1:6 with linespoints title "ib\\_read\\_bw, depth 16", \
     in using 1:7 with linespoints title "rdmactl bench read, depth 16"
