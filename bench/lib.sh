# shellcheck shell=bash
# bench/lib.sh: helpers for bench/run.sh and bench/report.sh (sourced, not run).
#
#   hs_fmt_dur SECONDS            "1h02m", "12m05s", "45s"
#   hs_h5attr FILE NAME           an attribute of the model's /config group ("" when unknown)
#   hs_machine_line               "MODEL, N cores, M GiB, kernel K"
#   hs_loadavg                    the 1/5/15-minute load averages, "a b c"
#   hs_write_meta OUT             OUT/meta.json from the HS_META_* environment
#   hs_aggregate OUT              runs.tsv + runs/*.json -> results.csv/json, summary.csv,
#                                 rtt_sweep.csv, tolerance_sweep.csv, table.md, plot/*.dat
#   hs_plots OUT                  gnuplot (bench/plots/*.gp) -> OUT/*.png
#
# The JSON and table work is Python 3 (standard library only) in bench/meta.py and
# bench/aggregate.py; gnuplot is needed for the plots only (skipped with a note without it).

HS_BENCH_DIR=${HS_BENCH_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}

hs_fmt_dur() {
  local s=${1%.*}
  [ -n "$s" ] || s=0
  if [ "$s" -ge 3600 ]; then printf '%dh%02dm' $((s / 3600)) $((s % 3600 / 60))
  elif [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60))
  else printf '%ds' "$s"; fi
}

hs_h5attr() {
  command -v h5dump >/dev/null 2>&1 || return 0
  h5dump -a "/config/$2" "$1" 2>/dev/null | sed -n 's/^ *(0): //p' | head -1 | sed 's/^"//; s/"$//'
}

# hs_shell_words ARGS...: the arguments as one copy-pasteable line (quoted only where needed).
hs_shell_words() {
  local a out='' sep=''
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./,=:+@%-]+$ ]]; then out+="$sep$a"
    else out+="$sep'${a//\'/\'\\\'\'}'"; fi
    sep=' '
  done
  printf '%s' "$out"
}

hs_loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "? ? ?"; }

hs_machine_line() {
  local model cores mem kern
  model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')  # not nproc: OMP_NUM_THREADS=1 is set
  mem=$(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null)
  kern=$(uname -r)
  printf '%s, %s cores, %s memory, kernel %s' "${model:-unknown CPU}" "$cores" "${mem:-?}" "$kern"
}

# hs_write_meta OUT: the run's description (HS_META_* variables, set by run.sh) as JSON.
hs_write_meta() {
  python3 "$HS_BENCH_DIR/meta.py" "$1"
}

hs_aggregate() {
  python3 "$HS_BENCH_DIR/aggregate.py" "$1"
}

# hs_plots OUT: the PNGs from OUT/plot/*.dat with bench/plots/*.gp.
hs_plots() {
  local out=$1 term gp
  if ! command -v gnuplot >/dev/null 2>&1; then
    echo "bench: gnuplot not found: no plots (install gnuplot-nox)" >&2
    return 0
  fi
  if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then term=pngcairo; else term=png; fi
  for gp in "$HS_BENCH_DIR"/plots/*.gp; do
    [ -e "$gp" ] || continue
    gnuplot -e "dir='$out/plot'; outdir='$out'; term='$term'" -e "load '$out/plot/lists.gp'" "$gp" \
      2>>"$out/plot/gnuplot.log" ||
      echo "bench: gnuplot failed on $(basename "$gp") (see $out/plot/gnuplot.log)" >&2
  done
}
