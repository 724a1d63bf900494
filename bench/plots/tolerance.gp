# tolerance.gp: the tolerance sweep of heads + speculation (greedy placement): acceptance per
# tolerance (left) and speedup over heads without speculation per tolerance (right): read
# across for acceptance against speedup.
n = words(tol_models)
if (n > 0) {
  set terminal term size 1100, 520 font ",10"
  set output outdir.'/tolerance_sweep.png'
  set multiplot layout 1, 2 title (tol_any_synthetic ? \
    "Tolerance sweep: heads + speculation (on synthetic weights the acceptance is not meaningful)" : \
    "Tolerance sweep: heads + speculation, greedy placement")."\n".caveat noenhanced
  set grid lc rgb "#dddddd"
  set key below noenhanced
  set bmargin 6
  set title "acceptance (kept / tried)"
  set xlabel "tolerance"
  set ylabel "acceptance"
  set yrange [-0.05:1.05]
  set xrange [0:*]
  set offsets graph 0.05, graph 0.05, 0, 0
  plot for [i = 1:n] sprintf("%s/tol_%d.dat", dir, i - 1) using 1:2 with linespoints pt 7 title word(tol_models, i)
  set title "speedup over heads only (same tolerances as on the left)"
  set xlabel "tolerance"
  set ylabel "x heads only (same placement)"
  set yrange [0:1.2<*]
  set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "#444444"
  plot for [i = 1:n] sprintf("%s/tol_%d.dat", dir, i - 1) using 1:3:4:5 with yerrorlines pt 7 title word(tol_models, i)
  unset multiplot
}
