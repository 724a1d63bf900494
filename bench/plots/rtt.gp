# rtt.gp: the RTT sweep, one column per swept model: s/token against RTT per configuration
# (top) and speedup over layer-wise at the same RTT (bottom; below 1 = head-level does not pay).
n = words(sweep_models)
if (n > 0) {
  set terminal term size (n * 640 + 60), 820 font ",10"
  set output outdir.'/rtt_sweep.png'
  set multiplot layout 2, n columnsfirst title "RTT sweep (jitter 20% of RTT)\n".caveat noenhanced
  set grid lc rgb "#dddddd"
  set key outside right top noenhanced
  set xlabel "RTT (ms)"
  set xrange [-1:*]
  array cfg[5] = ["layer", "head/greedy", "head/seed", "slice", "auto"]
  array col[5] = ["#222222", "#4477aa", "#aa7744", "#228833", "#ee6677"]
  array pts[5] = [7, 5, 4, 9, 6]
  do for [i = 1:n] {
    f = sprintf("%s/rtt_%d.dat", dir, i - 1)
    set title word(sweep_models, i) noenhanced
    set ylabel "s per token (median)"
    set yrange [0:*]
    unset arrow
    plot for [k = 1:5] f using 1:(column(4 * k - 2)):(column(4 * k - 1)):(column(4 * k)) \
         with yerrorlines lc rgb col[k] pt pts[k] title cfg[k]
    set ylabel "speedup over layer-wise"
    set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "#444444"
    plot for [k = 2:5] f using 1:(column(4 * k + 1)) with linespoints lc rgb col[k] pt pts[k] title cfg[k]
  }
  unset multiplot
}
