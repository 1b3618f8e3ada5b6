# Registering the largest region measured, by number of threads: each technique's p50 over one ibv_reg_mr of the
# whole (4 KiB pages), the baseline (1). The guest has 2 vCPUs: 4 threads oversubscribe them. Data: reg_bench
# --data-prefix (PREFIX-threads.dat: threads, then p50 ms of whole, populate, chunks, huge whole, huge populate).
# The title carries the data's date.
set terminal pngcairo size 800,500 noenhanced
set output out
date = system(sprintf("date -u -r '%s' +%%Y-%%m-%%d 2>/dev/null", in))
set title sprintf("Registering the largest region: time / one ibv_reg_mr, by threads (2 vCPUs)\nmeasured %s", date)
set xlabel "threads"
set ylabel "ratio (1 = one ibv_reg_mr, 4 KiB pages)"
set xtics 1
set yrange [0:2]
set key top right font ",9" box opaque
set grid
plot in using 1:($3/$2) with linespoints title "fault in by N threads, then ibv_reg_mr", \
     in using 1:($4/$2) with linespoints title "16 MRs by N threads (not one region)", \
     in using 1:($5/$2) with lines dashtype 3 title "one ibv_reg_mr (2 MiB pages)", \
     in using 1:($6/$2) with linespoints title "fault in by N threads (2 MiB pages)", \
     1 with lines dashtype 3 lc rgb "gray" notitle
