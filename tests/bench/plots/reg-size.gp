# Registering a large anonymous region, by size: each technique's p50 over one ibv_reg_mr of the whole (4 KiB
# pages), the baseline (1). Data: reg_bench --data-prefix (PREFIX-size.dat: size_mib, then p50 ms of whole,
# populate x2, chunks x2, huge whole, huge populate x2, rdmad, thp whole). The title carries the data's date.
set terminal pngcairo size 800,500 noenhanced
set output out
date = system(sprintf("date -u -r '%s' +%%Y-%%m-%%d 2>/dev/null", in))
set title sprintf("Registering a large region: time / one ibv_reg_mr, p50 (Soft-RoCE guest)\nmeasured %s", date)
set logscale x
set xrange [200:4000]
set xlabel "region size (MiB)"
set ylabel "ratio (1 = one ibv_reg_mr, 4 KiB pages)"
set yrange [0:2]
set key top right font ",9" box opaque
set grid
plot in using 1:($8/$2) with linespoints title "one ibv_reg_mr (MADV_HUGEPAGE)", \
     in using 1:($3/$2) with linespoints title "2 threads fault in, then ibv_reg_mr", \
     in using 1:($4/$2) with linespoints title "16 MRs by 2 threads (not one region)", \
     in using 1:($5/$2) with linespoints title "one ibv_reg_mr (2 MiB pages)", \
     in using 1:($6/$2) with linespoints title "2 threads fault in (2 MiB pages)", \
     in using 1:($7/$2) with linespoints lw 2 dashtype 2 title "RegisterMr through rdmad", \
     1 with lines dashtype 3 lc rgb "gray" notitle
