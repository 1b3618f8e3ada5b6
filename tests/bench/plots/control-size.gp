# RegisterMr of anonymous memory against its size: the direct ibv_reg_mr, the RPC, and the RPC minus the no-op
# RPC sampled just before it (issue 9's goal: at most 1.2x the verbs call). Data: control_bench --data-prefix.
set terminal pngcairo size 800,500
set output out
set title "RegisterMr: rdmad's RPC against ibv_reg_mr (Soft-RoCE guest, p50)"
set logscale xy
set xlabel "region size (bytes)"
set ylabel "time (us)"
set grid
set xtics ("4 KiB" 4096, "1 MiB" 1048576, "16 MiB" 16777216, "256 MiB" 268435456, "1 GiB" 1073741824)
set key top left box opaque
plot in using 1:2 with linespoints title "ibv_reg_mr (direct)", \
     in using 1:3 with linespoints title "RegisterMr RPC", \
     in using 1:5 with linespoints title "RPC - no-op RPC", \
     in using 1:4 with lines dashtype 2 title "no-op RPC (ListPds)"
