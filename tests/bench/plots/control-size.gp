# RegisterMr against ibv_reg_mr by region size, as a ratio: (the RPC - the no-op RPC sampled just before it) /
# the direct ibv_reg_mr, p50s, beside the goal (at most 1.2x). Data: control_bench --data-prefix (size_bytes,
# then verbs, RPC, no-op and RPC - no-op p50 in us). The title carries the date of the data file (the run's).
set terminal pngcairo size 800,500 noenhanced
set output out
date = system(sprintf("date -u -r '%s' +%%Y-%%m-%%d 2>/dev/null", in))
set title sprintf("RegisterMr: (RPC - no-op RPC) / ibv_reg_mr, p50 (Soft-RoCE guest)\nmeasured %s", date)
set logscale x
set xlabel "region size"
set ylabel "ratio (1 = the verbs call's own time)"
set yrange [0:*]
set grid
set xtics ("4 KiB" 4096, "1 MiB" 1048576, "16 MiB" 16777216, "256 MiB" 268435456, "1 GiB" 1073741824)
set key top right box opaque
plot in using 1:($5/$2) with linespoints lw 2 pt 7 title "RegisterMr: (RPC - no-op) / ibv_reg_mr", \
     1.2 with lines dashtype 2 lc rgb "red" title "goal: at most 1.2", \
     1 with lines dashtype 3 lc rgb "gray" notitle
