# Registering the largest region measured against the number of threads (p50): pre-faulting chunks in parallel
# then one ibv_reg_mr, and chunk MRs registered in parallel, beside one ibv_reg_mr of the whole (flat: one
# thread). The guest has 2 vCPUs: 4 threads oversubscribe them. Data: reg_bench --data-prefix (PREFIX-threads.dat).
set terminal pngcairo size 800,500 noenhanced
set output out
set title "Registering a large region against threads (Soft-RoCE guest, 2 vCPUs, p50)"
set xlabel "threads"
set ylabel "time to register (ms)"
set xtics 1
set yrange [0:*]
set key bottom left
set grid
plot in using 1:2 with lines dashtype 2 title "one ibv_reg_mr (4 KiB pages)", \
     in using 1:3 with linespoints title "populate + ibv_reg_mr (4 KiB pages)", \
     in using 1:4 with linespoints title "chunk MRs (4 KiB pages, not one region)", \
     in using 1:5 with lines dashtype 3 title "one ibv_reg_mr (2 MiB pages)", \
     in using 1:6 with linespoints title "populate + ibv_reg_mr (2 MiB pages)"
