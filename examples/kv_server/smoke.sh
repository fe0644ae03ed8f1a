#!/bin/sh
# SPDX-License-Identifier: MIT
# Smoke test for kv_server (run by CTest; also handy by hand):
#
#   sh smoke.sh path/to/kv_server path/to/kv_client shutdown|sigterm
#
# Starts the server on a free loopback port, runs the client against it
# with 4 connections x 1500 ops while sending SIGUSR1 to the server 5
# times, then stops the server with the SHUTDOWN command (shutdown) or
# SIGTERM (sigterm) and checks: the client verified every reply, the
# server printed its SIGUSR1 statistics, saw -EDEADLK in its handler
# (--demo-interrupt forces that case), and exited 0 after a clean
# shutdown. Bounded: the server stops by itself after 100 s whatever
# happens, the client gives up on a silent server after 30 s.
set -u
server=$1 client=$2 mode=$3
dir=$(mktemp -d) || exit 1
log=$dir/server.log
spid=

fail() {
	echo "smoke: FAIL: $*"
	echo "----- server output -----"
	cat "$log"
	exit 1
}
cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

"$server" --max-runtime 100 --demo-interrupt 1000 0 >"$log" 2>&1 &
spid=$!

port=
i=0
while [ -z "$port" ] && [ $i -lt 300 ]; do # up to 30 s on a busy machine
	port=$(sed -n 's/^kv_server: listening on 127\.0\.0\.1:\([0-9][0-9]*\) .*/\1/p' "$log")
	[ -n "$port" ] && break
	kill -0 "$spid" 2>/dev/null || fail "server died at startup"
	sleep 0.1
	i=$((i + 1))
done
[ -n "$port" ] || fail "server did not print its port"
echo "smoke: server pid $spid on port $port"

if [ "$mode" = shutdown ]; then
	"$client" --conns 4 --ops 1500 --usr1 "$spid" --usr1-count 5 --shutdown "$port"
	crc=$?
else
	"$client" --conns 4 --ops 1500 --usr1 "$spid" --usr1-count 5 "$port"
	crc=$?
	kill -TERM "$spid"
fi
wait "$spid"
src=$?
spid=

cat "$log"
[ $crc -eq 0 ] || fail "client exit status $crc"
[ $src -eq 0 ] || fail "server exit status $src"
n=$(grep -c '^\[SIGUSR1 #' "$log")
[ "$n" -ge 5 ] || fail "only $n SIGUSR1 reports"
grep -q 'handler EDEADLK [1-9]' "$log" || fail "no -EDEADLK seen by the handler"
if [ "$mode" = shutdown ]; then
	grep -q 'stopping (SHUTDOWN command)' "$log" || fail "not stopped by SHUTDOWN"
else
	grep -q 'stopping (signal)' "$log" || fail "not stopped by SIGTERM"
fi
grep -q '^kv_server: clean shutdown' "$log" || fail "no clean shutdown"
echo "smoke: PASS ($mode)"
