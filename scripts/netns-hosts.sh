#!/usr/bin/env bash
# Two "hosts" on one machine for multi-node tests: network namespaces joined
# by a veth pair, each with its own address.
#
#   scripts/netns-hosts.sh up   [PREFIX]   creates PREFIX-a (10.77.0.1) and PREFIX-b (10.77.0.2)
#   scripts/netns-hosts.sh down [PREFIX]   removes them
#   scripts/netns-hosts.sh link-down|link-up [PREFIX]   cuts or restores the link
#
# More hosts on one switch, for the link test:
#   scripts/netns-hosts.sh star PREFIX N       PREFIX-1..N (10.78.0.1..N) on a bridge in PREFIX-sw
#   scripts/netns-hosts.sh throttle PREFIX I RATE   host I's link to the switch at RATE both
#                                              ways (tc tbf, e.g. 100mbit): a slow NIC or cable
#   scripts/netns-hosts.sh star-down PREFIX N  removes them
#
# Run a command on a host with its own hostname:
#   ip netns exec PREFIX-a unshare --uts sh -c 'hostname node-a; exec CMD'
# Needs root and iproute2.
set -euo pipefail
cmd=${1:?usage: netns-hosts.sh up|down|link-down|link-up [PREFIX]}
p=${2:-gdn}
a=$p-a b=$p-b
case "$cmd" in
  up)
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    ip netns add "$a"
    ip netns add "$b"
    ip link add "$p-va" netns "$a" type veth peer name "$p-vb" netns "$b"
    ip -n "$a" addr add 10.77.0.1/24 dev "$p-va"
    ip -n "$b" addr add 10.77.0.2/24 dev "$p-vb"
    for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
    ip -n "$a" link set "$p-va" up
    ip -n "$b" link set "$p-vb" up
    ;;
  down)
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    ;;
  link-down) ip -n "$b" link set "$p-vb" down ;;
  link-up) ip -n "$b" link set "$p-vb" up ;;
  star)
    n=${3:?star needs a host count}
    for i in $(seq 1 "$n"); do ip netns del "$p-$i" 2>/dev/null || true; done
    ip netns del "$p-sw" 2>/dev/null || true
    ip netns add "$p-sw"
    ip -n "$p-sw" link add "$p-br" type bridge
    ip -n "$p-sw" link set "$p-br" up
    for i in $(seq 1 "$n"); do
      ip netns add "$p-$i"
      ip link add "$p-h$i" netns "$p-$i" type veth peer name "$p-s$i" netns "$p-sw"
      ip -n "$p-sw" link set "$p-s$i" master "$p-br" up
      ip -n "$p-$i" addr add "10.78.0.$i/24" dev "$p-h$i"
      ip -n "$p-$i" link set lo up
      ip -n "$p-$i" link set "$p-h$i" up
    done
    ;;
  throttle)
    i=${3:?throttle needs a host index} rate=${4:?throttle needs a rate}
    ip netns exec "$p-$i" tc qdisc replace dev "$p-h$i" root tbf rate "$rate" burst 64kb latency 100ms
    ip netns exec "$p-sw" tc qdisc replace dev "$p-s$i" root tbf rate "$rate" burst 64kb latency 100ms
    ;;
  star-down)
    n=${3:?star-down needs a host count}
    for i in $(seq 1 "$n"); do ip netns del "$p-$i" 2>/dev/null || true; done
    ip netns del "$p-sw" 2>/dev/null || true
    ;;
  *) echo "netns-hosts: unknown command $cmd" >&2; exit 2 ;;
esac
