# Registering a large anonymous region against its size, by technique (p50): one ibv_reg_mr of the whole (the
# baseline), on transparent huge pages, two threads pre-faulting chunks then one ibv_reg_mr, chunk MRs on two
# threads (not one region), on reserved 2 MiB huge pages, and RegisterMr through rdmad.
# Data: reg_bench --data-prefix (PREFIX-size.dat).
set terminal pngcairo size 800,500 noenhanced
set output out
set title "Registering a large region (Soft-RoCE guest, p50)"
set logscale xy
set xlabel "region size (MiB)"
set ylabel "time to register (ms)"
set key bottom right
set grid
plot in using 1:2 with linespoints title "one ibv_reg_mr (4 KiB pages)", \
     in using 1:8 with linespoints title "one ibv_reg_mr (MADV_HUGEPAGE)", \
     in using 1:3 with linespoints title "populate x2 + ibv_reg_mr", \
     in using 1:4 with linespoints title "chunk MRs x2 (not one region)", \
     in using 1:5 with linespoints title "one ibv_reg_mr (2 MiB pages)", \
     in using 1:6 with linespoints title "populate x2 + ibv_reg_mr (2 MiB pages)", \
     in using 1:7 with linespoints dashtype 2 title "RegisterMr through rdmad"
