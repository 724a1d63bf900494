# The start-up's inputs in a distributed run: link specs (keys, presets, media), link matrices
# and devices files reach every rank; a bad one ends the run before any model is loaded with
# one message from rank 0 that names the option or the file and line, and the right status
# (2: a bad link description, as a bad option; 1: another input).
# HEADSPLIT_TEST_QUICK=1 (the sanitizer build): one bad input of each kind that start-up
# handles on its own way (--emulate-link, --link-matrix, --devices); the parsers' other
# errors (bad key, medium, relay, missing matrix, devices rank) run under the sanitizers in
# unit.test_cluster (test_parse_link_errors, test_link_matrix_errors,
# test_devices_file_errors).
. "$(dirname "$0")/common.sh"
"$CONVERT" --synthetic stories260k --seed 4 --out "$T/m.h5"
base=(--model "$T/m.h5" --prompt hi --steps 6 --quiet)
# expect_error NAME STATUS PATTERN ARGS...: a 3-rank run fails with STATUS and exactly one
# error line on stderr (besides the RTT table and mpirun's own notes), matching PATTERN.
expect_error() {
  local name=$1 want=$2 pat=$3
  shift 3
  set +e
  run_hs 3 "${base[@]}" "$@" > /dev/null 2> "$T/err"
  local rc=$?
  set -e
  [ $rc -eq "$want" ] || { cat "$T/err"; fail "$name: exit $rc, want $want"; }
  [ "$(grep -c '^headsplit: error' "$T/err")" -eq 1 ] || fail "$name: not exactly one error line"
  grep '^headsplit: error' "$T/err" | grep -qE -- "$pat" ||
    fail "$name: '$(grep '^headsplit: error' "$T/err")' !~ $pat"
}
expect_error "link: bad time"   2 "^headsplit: error: \[rank 0\] --emulate-link: rtt=fast" --emulate-link rtt=fast
if ! is_quick; then
  expect_error "link: bad key"    2 "--emulate-link: unknown key 'loss'"            --emulate-link rtt=1ms,loss=1
  expect_error "link: bad medium" 2 "--emulate-link: medium=air"                    --emulate-link wifi,medium=air
  expect_error "link: relay"      2 "--emulate-link: relay=ap needs medium=shared"  --emulate-link ethernet,relay=ap
fi
printf '* * rtt=1ms\n0 7 rtt=2ms\n' > "$T/far.mx"
expect_error "matrix: rank"     2 "far.mx:2: '7' is not a rank 0..2"              --link-matrix "$T/far.mx"
is_quick ||
  expect_error "matrix: missing"  2 "nosuch.mx: cannot open"                      --link-matrix "$T/nosuch.mx"
printf '1 mem=1G\n2 speed=fast\n' > "$T/bad.dev"
expect_error "devices: value"   1 "^headsplit: error: \[rank 0\] --devices: .*bad.dev:2: 'speed=fast'" --devices "$T/bad.dev"
printf '3 mem=1G\n' > "$T/rank.dev"
is_quick ||
  expect_error "devices: rank"    1 "rank.dev:1: '3' is not a worker rank 1..2"   --devices "$T/rank.dev"
# Good inputs: a preset with an override, and a matrix over it; the emulated RTT is measured.
printf '# the controller is far\n0 * wifi,rtt=30ms\n* 0 wifi,rtt=30ms\n' > "$T/ok.mx"
# 15 ping-pongs a pair (5 by default): their median stays on the link when a busy host
# delays a few of them
run_hs 3 "${base[@]}" --emulate-link wifi --link-matrix "$T/ok.mx" --metrics "$T/ok.json" \
  --rtt-pings 15 2> /dev/null || fail "wifi preset with a matrix failed"
near=$(jq '.rtt_ms[1][2]' "$T/ok.json")
far=$(jq '.rtt_ms[0][1]' "$T/ok.json")
awk -v n="$near" -v f="$far" 'BEGIN { exit !(n > 8 && n < 25 && f > 27 && f < 50) }' ||
  fail "measured RTTs $near ms (wifi: 10) and $far ms (matrix: 30) do not match the links"
jq -e '.config.emulate_link == "wifi"' "$T/ok.json" > /dev/null || fail "metrics lost --emulate-link"
echo "PASS: start-up inputs: bad links, matrices and devices files named; presets and matrices emulated"
