# The Kubernetes provider's way to the launcher of a sandbox pod (ADR 47): run through the exec
# API as `perl -e <this file>`, it connects to pod-channel.py's abstract unix socket and copies
# its stdin there and what comes back to its stdout: the launcher's frames both ways. It ends when
# either side does. Exit 7, the reason on stderr, when nothing listens there (a pod started
# without the launcher), so that the host can tell that from a connection that broke.
#
# Perl without modules (perl-base is in every Debian system): AF_UNIX and SOCK_STREAM are 1 on
# Linux. Where PID 1 is the launcher it retries for two seconds (the pod has just started);
# elsewhere it tries once.
my $name = $ENV{BERTH_POD_CHANNEL} || "berth-pod-channel";
my $init = ""; if (open(my $comm, "<", "/proc/1/comm")) { $init = <$comm> // ""; chomp $init }
my $tries = $init eq "berth-launcher" || $ENV{BERTH_POD_CHANNEL} ? 200 : 1;
socket(S, 1, 1, 0) or die "socket: $!";
my $connected; for (1 .. $tries) { last if $connected = connect(S, pack("S a*", 1, "\0$name")); select(undef, undef, undef, 0.01) }
unless ($connected) { print STDERR "the pod's launcher channel is not there ($!)\n"; exit 7 }
my %to = (fileno(STDIN) => [\*STDIN, \*S], fileno(S) => [\*S, \*STDOUT]);
while (1) {
  my $want = "";
  vec($want, $_, 1) = 1 for keys %to;
  select(my $ready = $want, undef, undef, undef) > 0 or next;
  for my $fd (keys %to) {
    next unless vec($ready, $fd, 1);
    my ($from, $dest) = @{$to{$fd}};
    my $n = sysread($from, my $data, 262144);
    exit 0 unless $n;
    while (length $data) { my $w = syswrite($dest, $data) // exit 0; substr($data, 0, $w) = "" }
  }
}
