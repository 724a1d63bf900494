# seconds.gp: seconds per 256 tokens per configuration, one panel per model (bars: median over
# repeats; whiskers: min-max).  Called by bench/lib.sh (hs_plots) with dir, outdir, term and
# the model lists of OUT/plot/lists.gp.
n = words(main_models)
if (n > 0) {
  set terminal term size (n * 430 + 80), 560 font ",10"
  set output outdir.'/seconds_per_256.png'
  set multiplot layout 1, n title sprintf("Seconds per 256 tokens (median s/token x 256; RTT %s ms; lower is better)\n%s", base_rtt, caveat) noenhanced
  set style fill solid 0.75 border -1
  set boxwidth 0.7
  set xtics rotate by 35 right nomirror noenhanced
  set ytics nomirror
  set grid ytics lc rgb "#dddddd"
  set key off
  set yrange [0:*]
  set offsets 0.5, 0.5, 0, 0
  set lmargin 9
  set bmargin 9
  do for [i = 1:n] {
    set title word(main_models, i) noenhanced
    set ylabel "s per 256 tokens"
    f = sprintf("%s/seconds_%d.dat", dir, i - 1)
    plot f using 0:2:xtic(1) with boxes lc rgb "#4477aa", \
         f using 0:2:3:4 with yerrorbars lc rgb "black" pt 7 ps 0, \
         f using 0:2:(sprintf("%.3g", $2)) with labels offset 0, 0.8 font ",9"
  }
  unset multiplot
}
