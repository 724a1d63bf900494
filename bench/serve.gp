# bench/serve.gp: aggregate generated tokens/s against concurrent clients, one line per plan
# (bench/serve.sh: gnuplot -e "dir='OUT'" bench/serve.gp).
set terminal pngcairo size 720, 480 font ",10"
set output dir.'/serve.png'
set title "Concurrent streamed clients (bench/serve.sh)" noenhanced
set xlabel "concurrent clients"
set ylabel "aggregate generated tokens/s (median, range)"
set logscale x 2
set grid lc rgb "#dddddd"
set key left top noenhanced
set yrange [0:*]
stats dir.'/serve.dat' nooutput
plot for [i = 0:STATS_blocks - 1] dir.'/serve.dat' index i using 1:2:3:4 \
     with yerrorlines title columnhead(1)
