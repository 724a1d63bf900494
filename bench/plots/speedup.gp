# speedup.gp: speedup over layer-wise per configuration, models side by side (bars: ratio of
# medians; whiskers: per-repeat ratios min-max); dashed lines at 1x and 2x.
n = words(main_models)
if (n > 0) {
  set terminal term size (n_cfg * 130 + 260), 560 font ",10"
  set output outdir.'/speedup.png'
  set title sprintf("Speedup over layer-wise (RTT %s ms; higher is better)\n%s", base_rtt, caveat) noenhanced
  set style data histogram
  set style histogram errorbars gap 1.5 lw 1
  set style fill solid 0.8 border -1
  set xtics rotate by 25 right nomirror noenhanced
  set ytics nomirror
  set grid ytics lc rgb "#dddddd"
  set yrange [0:speedup_ymax]
  set ylabel "x layer-wise"
  set key top left noenhanced
  set bmargin 7
  set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "#444444"
  set arrow 2 from graph 0, first 2 to graph 1, first 2 nohead dt 3 lc rgb "#aa3333"
  f = dir.'/speedup.dat'
  set label 1 "2x" at graph 1, first 2 offset 0.5, 0 tc rgb "#aa3333" font ",9"
  plot for [i = 1:n] f using (column(3 * i - 1)):(column(3 * i)):(column(3 * i + 1)):xtic(1) \
       title word(main_models, i)
}
