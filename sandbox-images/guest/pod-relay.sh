# A TCP connection to a port on a pod's loopback, relayed over the exec API for the Kubernetes
# provider's port proxy (ADR 40): run as `bash -c "<this file>" berth-relay PORT`. Its stdin goes to
# the port and what the port sends comes on its stdout, after one byte `c` once connected (exit 7,
# the reason on stderr, when nothing accepts connections there).
exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 7
printf c
cat <&3 &
cat >&3
wait
