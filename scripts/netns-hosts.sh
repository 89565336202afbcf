#!/usr/bin/env bash
# Two "hosts" on one machine for multi-node tests: network namespaces joined
# by a veth pair, each with its own address.
#
#   scripts/netns-hosts.sh up   [PREFIX]   creates PREFIX-a (10.77.0.1) and PREFIX-b (10.77.0.2)
#   scripts/netns-hosts.sh down [PREFIX]   removes them
#   scripts/netns-hosts.sh link-down|link-up [PREFIX]   cuts or restores the link
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
  *) echo "netns-hosts: unknown command $cmd" >&2; exit 2 ;;
esac
