# bench/breakeven.gp: the break-even heatmaps of bench/breakeven.py, one PNG per model shape
# and stored type with a panel per medium: RTT across, bandwidth up; the colour is log2 of
# the best head-level or slice plan's speed over the best layer-wise plan's (one board or
# layer-dp; red: a split pays, blue: layer-wise is faster); the label names the winner
# (1 one board, L layer-wise, H head-level, S slice; ties within 2% go to the simpler plan)
# and the ratio.  Called as: gnuplot -e "dir='OUT'; term='pngcairo'" bench/breakeven.gp
load dir.'/axes.gp'
nr = words(rtts)
nb = words(bws)
set palette defined (-2 "#2166ac", -1 "#92c5de", 0 "#f7f7f7", 1 "#f4a582", 2 "#b2182b")
set cbrange [-2:2]
set cbtics ("0.25x" -2, "0.5x" -1, "1x" 0, "2x" 1, "4x" 2)
set cblabel "best head/slice over best layer-wise"
set xrange [-0.5:nr - 0.5]
set yrange [-0.5:nb - 0.5]
set xtics () ; set ytics ()
do for [i = 1:nr] { set xtics add (word(rtts, i) i - 1) }
do for [i = 1:nb] { set ytics add (word(bws, i) i - 1) }
set xlabel "RTT (ms)"
set ylabel "bandwidth (Mbit/s)"
set datafile missing "NaN"
set tics nomirror out
done_ = ""
do for [m = 1:words(maps)] {
  f = word(maps, m)
  # map_SHAPE_TYPE_MEDIUM.dat: one PNG per SHAPE_TYPE, made at its "shared" map
  if (strstrt(f, "_shared.dat") > 0) {
    base = f[5:strstrt(f, "_shared.dat") - 1]
    set terminal term size 1100, 460 font ",9"
    set output dir.'/breakeven_'.base.'.png'
    set multiplot layout 1, 2 title base.": 5 Pi 4 boards (a controller, 4 workers), simulated" noenhanced
    do for [med in "shared switched"] {
      g = dir.'/map_'.base.'_'.med.'.dat'
      set title med.(med eq "shared" ? " medium (one channel via an AP)" : " links") noenhanced
      plot g using 1:2:3 with image notitle, g using 1:2:4 with labels font ",8" notitle
    }
    unset multiplot
  }
}
