#!/usr/bin/env bash
# netem.sh: injects WiFi-like latency, jitter and a bandwidth cap on a real cluster's network
# interface with `tc qdisc ... netem`, so that the distributed engine can be measured over a
# slow link between real nodes.  The one-host equivalent is the engine's own
# --emulate-link rtt=10ms,jitter=2ms,bw=200mbit; see docs/testbed.md.
#
# netem delays a host's *outgoing* packets only.  A round trip crosses two hosts' egress, so by
# default each host gets half the RTT (and half the jitter): run the same `add` on every node.
# With --whole-rtt this host alone gets all of it (when only one side can be shaped).
set -euo pipefail

PROG=netem.sh
EXIT_USAGE=2 EXIT_NO_NETEM=3 EXIT_NO_TC=4

usage() {
  cat <<EOF
usage: $PROG add IFACE --rtt TIME [--jitter TIME] [--rate RATE] [--loss PCT] [--limit PKTS]
                  [--dst CIDR]... [--whole-rtt] [--dry-run]
       $PROG del IFACE [--dry-run]
       $PROG show IFACE
       $PROG check [IFACE]

  add     replaces IFACE's root qdisc with netem (removing an earlier netem set-up first)
  del     removes it again (the kernel's default qdisc returns)
  show    prints IFACE's qdiscs with statistics, and filters
  check   tells whether this machine can use netem: tc present, kernel netem support (tried
          on lo in a throwaway network namespace when possible, never on IFACE itself)

  --rtt TIME      round-trip time to add between two shaped hosts, e.g. 10ms (us, ms, s)
  --jitter TIME   jitter, e.g. 2ms: each way varies uniformly by +- half of it, as the
                  engine's --emulate-link does (default 0).  netem reorders packets that
                  jitter overtakes unless a --rate is set too (it then sends in order)
  --rate RATE     bandwidth cap of this host's egress, e.g. 200mbit (kbit, mbit, gbit, bps...)
  --loss PCT      random loss, e.g. 0.1% (default none)
  --limit PKTS    netem queue length in packets (default 10000: large MPI messages queue
                  behind the rate cap and must not be dropped)
  --dst CIDR      shape only traffic to these peers (repeatable), e.g. 10.0.0.0/24; without it
                  all egress on IFACE is shaped, ssh and shared file systems included
  --whole-rtt     put the whole RTT and jitter on this host (default: half here, half on the
                  peer, which must run the same command)
  --dry-run       print the tc commands instead of running them

Needs root (CAP_NET_ADMIN), tc from iproute2 (TC=/path/to/tc to choose one) and a kernel
with netem (CONFIG_NET_SCH_NETEM, module sch_netem).  Exit status: 0 done, 1 tc failed,
$EXIT_USAGE usage error, $EXIT_NO_NETEM kernel lacks netem, $EXIT_NO_TC tc missing.

Example (on every node):  sudo scripts/netem.sh add eth0 --rtt 10ms --jitter 2ms --rate 200mbit --dst 10.0.0.0/24
EOF
}

say() { echo "$PROG: $*" >&2; }
die() { local rc=$1; shift; say "$*"; exit "$rc"; }
die_usage() { say "$*"; echo "Run '$PROG --help' for usage." >&2; exit $EXIT_USAGE; }

# to_us TIME OPTION: sets US to TIME (e.g. 10ms, 2.5ms, 500us, 0.01s) in microseconds.
to_us() {
  [[ "$1" =~ ^([0-9]*)(\.([0-9]{1,6}))?(us|usec|ms|msec|s|sec)$ ]] ||
    die_usage "$2 '$1' is not a time such as 10ms, 500us or 0.01s"
  local ip=${BASH_REMATCH[1]} fp=${BASH_REMATCH[3]} unit=${BASH_REMATCH[4]} mult div=1 i
  [ -n "$ip$fp" ] || die_usage "$2 '$1' is not a time such as 10ms, 500us or 0.01s"
  case "$unit" in us | usec) mult=1 ;; ms | msec) mult=1000 ;; *) mult=1000000 ;; esac
  for ((i = 0; i < ${#fp}; i++)); do div=$((div * 10)); done
  US=$(( ((10#${ip:-0} * div + 10#${fp:-0}) * mult + div / 2) / div ))
}

# find_tc: sets TC to the tc binary (PATH, then /usr/sbin and /sbin, which a user's PATH may lack).
find_tc() {
  if [ -n "${TC:-}" ]; then
    [ -x "$TC" ] || die $EXIT_NO_TC "TC='$TC' is not an executable: install iproute2 or fix TC"
    return
  fi
  TC=$(PATH="$PATH:/usr/sbin:/sbin" command -v tc || true)
  [ -n "$TC" ] || die $EXIT_NO_TC "'tc' not found (in PATH, /usr/sbin, /sbin): install iproute2" \
    "(Debian/Ubuntu: apt-get install iproute2; RHEL/Fedora: dnf install iproute-tc)"
}

# kernel_netem: sets NETEM_STATE to yes / no / unknown and NETEM_WHY to the evidence, without
# touching any interface.
kernel_netem() {
  NETEM_STATE=unknown NETEM_WHY=
  local rel
  rel=$(uname -r)
  if [ -d /sys/module/sch_netem ]; then NETEM_STATE=yes NETEM_WHY="module sch_netem is loaded"; return; fi
  if [ -r "/lib/modules/$rel/modules.builtin" ] && grep -q '/sch_netem\.ko' "/lib/modules/$rel/modules.builtin"; then
    NETEM_STATE=yes NETEM_WHY="sch_netem is built into kernel $rel"; return
  fi
  local cfg=
  if [ -r /proc/config.gz ] && command -v zcat >/dev/null; then
    cfg=$(zcat /proc/config.gz 2>/dev/null | grep -E '^(# )?CONFIG_NET_SCH_NETEM[ =]' || true)
  elif [ -r "/boot/config-$rel" ]; then
    cfg=$(grep -E '^(# )?CONFIG_NET_SCH_NETEM[ =]' "/boot/config-$rel" || true)
  fi
  case "$cfg" in
    *"is not set"*) NETEM_STATE=no NETEM_WHY="kernel $rel is built without netem (CONFIG_NET_SCH_NETEM is not set)"; return ;;
    *"=y"*) NETEM_STATE=yes NETEM_WHY="kernel $rel has netem built in (CONFIG_NET_SCH_NETEM=y)"; return ;;
  esac
  local mp msg
  mp=$(PATH="$PATH:/usr/sbin:/sbin" command -v modprobe || true)
  if [ -n "$mp" ]; then
    if msg=$("$mp" sch_netem 2>&1); then
      NETEM_STATE=yes NETEM_WHY="loaded module sch_netem with modprobe"
    else
      NETEM_STATE=no NETEM_WHY="'modprobe sch_netem' failed: ${msg:-no message}"
      # modprobe fails for non-root users too: that is not proof.
      [ "$(id -u)" -eq 0 ] || NETEM_STATE=unknown
    fi
  else
    NETEM_WHY="no modprobe, no kernel config to read; only trying netem will tell"
  fi
}

# explain_tc_error MESSAGE: exits with a clear message when MESSAGE says that the kernel lacks
# what KIND (netem, prio or u32) needs.
KIND=netem
explain_tc_error() {
  case "$1" in
    *"nknown qdisc"* | *"kind is unknown"* | *"No such file or directory"* | *"nknown filter"*)
      case "$KIND" in
        prio) die $EXIT_NO_NETEM "the kernel lacks the prio qdisc that --dst needs: tc says '$1'" \
          "(CONFIG_NET_SCH_PRIO, module sch_prio); shape all of $IFACE without --dst instead" ;;
        u32) die $EXIT_NO_NETEM "the kernel lacks the u32 classifier that --dst needs: tc says '$1'" \
          "(CONFIG_NET_CLS_U32, module cls_u32); shape all of $IFACE without --dst instead" ;;
      esac
      kernel_netem
      die $EXIT_NO_NETEM "the kernel lacks netem: tc says '$1'${NETEM_WHY:+; $NETEM_WHY}." \
        "Load it with 'modprobe sch_netem' (package linux-modules-extra-\$(uname -r) on Ubuntu," \
        "kernel-modules-extra on RHEL/Fedora) or use a kernel with CONFIG_NET_SCH_NETEM."
      ;;
    *"Operation not permitted"*)
      die 1 "tc was refused: '$1' (needs root or CAP_NET_ADMIN)" ;;
  esac
}

# run_tc ARGS...: runs (or, with --dry-run, prints) tc ARGS; explains a failure and exits 1.
run_tc() {
  if [ "$DRY_RUN" = 1 ]; then echo "tc $*"; return 0; fi
  local msg
  if ! msg=$("$TC" "$@" 2>&1); then
    msg=$(tr '\n' ' ' <<<"$msg")
    msg=${msg%% }
    explain_tc_error "$msg"
    die 1 "'tc $*' failed: $msg"
  fi
  [ -z "$msg" ] || echo "$msg"
}

require_iface() {
  [ -n "${IFACE:-}" ] || die_usage "$ACTION needs an interface name, e.g. '$PROG $ACTION eth0'"
  [ "$DRY_RUN" = 1 ] || [ -e "/sys/class/net/$IFACE" ] ||
    die_usage "no network interface '$IFACE' here (see 'ip link')"
}

# ---- check --------------------------------------------------------------------------------
do_check() {
  find_tc
  echo "tc: $TC ($("$TC" -V 2>&1 | head -n 1))"
  kernel_netem
  echo "kernel: ${NETEM_WHY:-no evidence either way}"
  # The real test: netem on lo inside a throwaway network namespace (no real interface changes).
  local ip ns msg
  ip=$(PATH="$PATH:/usr/sbin:/sbin" command -v ip || true)
  if [ -n "$ip" ] && [ "$(id -u)" -eq 0 ]; then
    ns="hs-netem-check-$$"
    if "$ip" netns add "$ns" 2>/dev/null; then
      # shellcheck disable=SC2064
      trap "'$ip' netns del '$ns' 2>/dev/null || true" EXIT
      "$ip" -n "$ns" link set lo up
      if msg=$("$ip" netns exec "$ns" "$TC" qdisc add dev lo root netem delay 1ms 100us rate 100mbit 2>&1); then
        echo "netem: works (tried on lo in network namespace $ns)"
        "$ip" netns del "$ns"
        trap - EXIT
        return 0
      fi
      "$ip" netns del "$ns" 2>/dev/null || true
      trap - EXIT
      msg=$(tr '\n' ' ' <<<"$msg")
      explain_tc_error "${msg%% }"
      die 1 "netem on lo in a namespace failed: $msg"
    fi
  fi
  case "$NETEM_STATE" in
    yes) echo "netem: probably available (not tried: needs root and 'ip netns')" ;;
    no) die $EXIT_NO_NETEM "the kernel lacks netem: $NETEM_WHY" ;;
    *) echo "netem: unknown (not tried: needs root and 'ip netns')" ;;
  esac
}

# ---- command line -------------------------------------------------------------------------
[ $# -gt 0 ] || { usage >&2; exit $EXIT_USAGE; }
ACTION=$1
shift
case "$ACTION" in
  -h | --help | help) usage; exit 0 ;;
  add | del | show | check) ;;
  *) die_usage "unknown action '$ACTION' (add, del, show or check)" ;;
esac
IFACE=
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then IFACE=$1; shift; fi
RTT='' JITTER='' RATE='' LOSS='' LIMIT=10000 WHOLE=0 DRY_RUN=0
DSTS=()
need_arg() { if [ $# -lt 2 ] || [ -z "$2" ]; then die_usage "option $1 needs a value"; fi; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rtt) need_arg "$@"; RTT=$2; shift 2 ;;
    --jitter) need_arg "$@"; JITTER=$2; shift 2 ;;
    --rate) need_arg "$@"; RATE=$2; shift 2 ;;
    --loss) need_arg "$@"; LOSS=$2; shift 2 ;;
    --limit) need_arg "$@"; LIMIT=$2; shift 2 ;;
    --dst) need_arg "$@"; DSTS+=("$2"); shift 2 ;;
    --whole-rtt) WHOLE=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die_usage "unknown option '$1' for $ACTION" ;;
  esac
done

case "$ACTION" in
  check) do_check; exit 0 ;;
  show)
    require_iface
    find_tc
    "$TC" -s qdisc show dev "$IFACE"
    "$TC" filter show dev "$IFACE" 2>/dev/null || true
    exit 0 ;;
  del)
    require_iface
    [ "$DRY_RUN" = 1 ] || find_tc
    if [ "$DRY_RUN" = 0 ] && ! "$TC" qdisc show dev "$IFACE" root | grep -qE 'qdisc (netem|prio 1:)'; then
      echo "$PROG: no netem set-up on $IFACE; nothing to remove"
      exit 0
    fi
    run_tc qdisc del dev "$IFACE" root
    echo "$PROG: removed netem from $IFACE"
    exit 0 ;;
esac

# ---- add ----------------------------------------------------------------------------------
require_iface
[ -n "$RTT" ] || die_usage "add needs --rtt, e.g. --rtt 10ms"
to_us "$RTT" --rtt
RTT_US=$US
JIT_US=0
[ -z "$JITTER" ] || { to_us "$JITTER" --jitter; JIT_US=$US; }
[ "$JIT_US" -le "$RTT_US" ] || die_usage "--jitter $JITTER is larger than --rtt $RTT"
if [ -n "$RATE" ] && ! [[ "$RATE" =~ ^[0-9]+(\.[0-9]+)?([kKmMgGtT]?(bit|bps)|[kKmMgGtT]ibit|[kKmMgGtT]ibps)$ ]]; then
  die_usage "--rate '$RATE' is not a rate such as 200mbit, 1gbit or 25mbps"
fi
if [ -n "$LOSS" ] && ! [[ "$LOSS" =~ ^[0-9]+(\.[0-9]+)?%$ ]]; then
  die_usage "--loss '$LOSS' is not a percentage such as 0.1%"
fi
[[ "$LIMIT" =~ ^[1-9][0-9]*$ ]] || die_usage "--limit '$LIMIT' is not a positive number of packets"
for d in "${DSTS[@]}"; do
  [[ "$d" =~ ^[0-9.]+(/[0-9]+)?$ || "$d" =~ ^[0-9a-fA-F:]+(/[0-9]+)?$ ]] ||
    die_usage "--dst '$d' is not an IPv4 or IPv6 address or CIDR such as 10.0.0.0/24"
done

# This host's share of the round trip.
if [ "$WHOLE" = 1 ]; then DELAY_US=$RTT_US J_US=$JIT_US
else DELAY_US=$((RTT_US / 2)) J_US=$((JIT_US / 2)); fi
NETEM=(netem limit "$LIMIT" delay "${DELAY_US}us")
[ "$J_US" -eq 0 ] || NETEM+=("${J_US}us")   # uniform +- jitter/2 per way, as --emulate-link
[ -z "$LOSS" ] || NETEM+=(loss "$LOSS")
[ -z "$RATE" ] || NETEM+=(rate "$RATE")

if [ "$DRY_RUN" = 0 ]; then
  find_tc
  kernel_netem
  if [ "$NETEM_STATE" = no ]; then
    die $EXIT_NO_NETEM "the kernel lacks netem: $NETEM_WHY." \
      "Load it with 'modprobe sch_netem' or use a kernel with CONFIG_NET_SCH_NETEM; $IFACE is unchanged."
  fi
  # Start from the default qdisc (an earlier netem.sh set-up included).
  if "$TC" qdisc show dev "$IFACE" root | grep -qE 'qdisc (netem|prio 1:)'; then
    run_tc qdisc del dev "$IFACE" root
  fi
fi

if [ ${#DSTS[@]} -eq 0 ]; then
  run_tc qdisc add dev "$IFACE" root "${NETEM[@]}"
else
  # A 4-band prio qdisc whose default priomap uses bands 1-3 only; the filters send traffic
  # for the listed peers to band 4, which holds netem.  A failure half-way removes it again.
  KIND=prio
  run_tc qdisc add dev "$IFACE" root handle 1: prio bands 4 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
  [ "$DRY_RUN" = 1 ] || trap '"$TC" qdisc del dev "$IFACE" root 2>/dev/null || true' EXIT
  KIND=netem
  run_tc qdisc add dev "$IFACE" parent 1:4 handle 40: "${NETEM[@]}"
  KIND=u32
  for d in "${DSTS[@]}"; do
    case "$d" in
      *:*) run_tc filter add dev "$IFACE" parent 1: protocol ipv6 prio 2 u32 match ip6 dst "$d" flowid 1:4 ;;
      *) run_tc filter add dev "$IFACE" parent 1: protocol ip prio 1 u32 match ip dst "$d" flowid 1:4 ;;
    esac
  done
  trap - EXIT
fi
[ "$DRY_RUN" = 1 ] && exit 0
side="half of it on this host: run the same command on the peers"
[ "$WHOLE" = 0 ] || side="all of it on this host"
echo "$PROG: $IFACE: +${RTT} RTT${JITTER:+ (jitter $JITTER)}${RATE:+, egress capped at $RATE}${LOSS:+, loss $LOSS}" \
  "${DSTS[*]:+to ${DSTS[*]} }($side); remove with '$PROG del $IFACE'"
