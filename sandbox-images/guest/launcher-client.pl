# The launcher's client: `runsc exec` runs `perl -e <this file> -- <program...>` for every exec;
# it hands the program to the sandbox's launcher (launcher.py) and relays its output (ADR 5).
# Perl without modules: AF_UNIX and SOCK_STREAM are 1 on Linux. It retries for two seconds while
# the launcher of a sandbox that has just started is not listening yet. `relay` maps each pipe's
# descriptor to the pipe and where its data goes; select waits for pipes and the launcher's
# answers until the status came, and after it only takes what is there already.
socket(S, 1, 1, 0);
my $connected; for (1 .. 200) { last if $connected = connect(S, pack("S a*", 1, "\0berth-launcher")); select(undef, undef, undef, 0.01) }
unless ($connected) { print STDERR "berth: the sandbox's launcher is not running ($!)\n"; exit 255 }
pipe(OUT, OUT_W); pipe(ERR, ERR_W);
syswrite(S, fileno(OUT_W) . " " . fileno(ERR_W) . "\n");
my %relay = (fileno(OUT) => [\*OUT, \*STDOUT], fileno(ERR) => [\*ERR, \*STDERR]);
my ($reply, $status) = ("");
while (!defined $status || %relay) {
  my $want = "";
  vec($want, $_, 1) = 1 for keys %relay;
  vec($want, fileno(S), 1) = 1 unless defined $status;
  last unless select(my $ready = $want, undef, undef, defined $status ? 0 : undef);
  for my $fd (keys %relay) {
    next unless vec($ready, $fd, 1);
    my ($from, $to) = @{$relay{$fd}};
    if (sysread($from, my $data, 65536)) { while (length $data) { my $n = syswrite($to, $data) // last; substr($data, 0, $n) = "" } }
    else { delete $relay{$fd} }
  }
  next unless vec($ready, fileno(S), 1);
  sysread(S, $reply, 4096, length $reply) or $reply .= "error: it stopped answering\n";
  if ($reply =~ s/^started\n//) { close OUT_W; close ERR_W }
  $status = $1 if $reply =~ /^(.*)\n/;
}
exit $status if $status =~ /^\d+$/;
if ($status =~ /^timeout (\d+)$/) { print STDERR "timeout: sending signal TERM to command '$ARGV[0]'\n"; exit($1 == 137 ? 137 : 124) }
$status =~ s/^error: //;
print STDERR "berth: the sandbox's launcher could not run it: $status\n";
exit 255;
