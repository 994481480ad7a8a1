# The launcher's client: `runsc exec` runs `perl -e <this file> -- <program...>` for every exec,
# with the host's result pipe passed in as descriptor 3 (`runsc exec --pass-fd`). It hands the
# program to the sandbox's launcher (launcher.py), copies the program's output to its own stdout
# and stderr, and writes how the program ended as one record on descriptor 3: the JSON object's
# length in bytes in decimal, a newline, and the object (see launcher.py's `outcome`; a launcher it
# cannot reach gives {"outcome": "failed", "error": ...}). Its exit status is 0 when the launcher
# answered and 255 when it did not; the record is what tells the program's.
#
# Perl without modules (perl-base is in every Debian system, and starts as fast as bash):
# AF_UNIX and SOCK_STREAM are 1 on Linux. It retries for two seconds while the launcher of a
# sandbox that has just started is not listening yet. `relay` maps each pipe's descriptor to the
# pipe and where its data goes; select waits for pipes and the launcher's answers until the
# outcome came, and after it only takes what is there already (a background child may keep the
# pipes open for hours).

sub json_string { my ($text) = @_; $text =~ s/(["\\])/\\$1/g; $text =~ s/([\x00-\x1f])/sprintf("\\u%04x", ord $1)/ge; "\"$text\"" }
sub failed { '{"outcome": "failed", "error": ' . json_string($_[0]) . '}' }
# Before any socket or pipe could take descriptor 3. Run by hand, without it: the record goes to stderr.
open(my $channel, '>&=', 3) or $channel = \*STDERR;
sub report {
  my ($record, $status) = @_;
  my $frame = length($record) . "\n" . $record;
  while (length $frame) { my $n = syswrite($channel, $frame) // last; substr($frame, 0, $n) = "" }
  exit $status;
}

my $socket_name = $ENV{BERTH_LAUNCHER_SOCKET} || "berth-launcher";
socket(S, 1, 1, 0);
my $connected; for (1 .. 200) { last if $connected = connect(S, pack("S a*", 1, "\0$socket_name")); select(undef, undef, undef, 0.01) }
report(failed("the sandbox's launcher is not running ($!)"), 255) unless $connected;
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
report($status, 0) if $status =~ /^\{/;
# A launcher from before the records (a sandbox started, or checkpointed, by an older Berth)
# answers with a line of text: its meaning, as a record.
report(qq({"outcome": "exited", "exitCode": $status}), 0) if $status =~ /^\d+$/;
report(qq({"outcome": "timedOut", "exitCode": $1}), 0) if $status =~ /^timeout (\d+)$/;
$status =~ s/^error: //;
report(failed("the sandbox's launcher could not run it: $status"), 255);
