#!/usr/bin/env bash
# Checks the documentation the README points into:
#   - README.md, the front door, is at most 300 lines (the manual is docs/);
#   - every relative markdown link of README.md and docs/*.md resolves: the
#     file or directory exists, and a #anchor (also one into the same file)
#     is the GitHub slug of a heading of the target .md file. Links in
#     fenced code blocks and inline code are not links; http(s), mailto and
#     other URLs with a scheme are not checked.
# GitHub's slug of a heading: its text without markup (backticks, emphasis,
# link targets), lower-cased, every character that is not a letter, digit,
# mark, space, '-' or '_' removed, each space turned into '-'; the second
# heading of one slug gets "-1", the third "-2", and so on.
# Prints what is wrong and exits 1; needs only perl. Files to check instead
# of README.md and docs/*.md may be given as arguments (the line limit is
# the README's only).
set -euo pipefail
cd "$(dirname "$0")/.."

max_readme_lines=300
status=0

if [ $# -eq 0 ]; then
  set -- README.md docs/*.md
fi

if [ -f README.md ]; then
  lines=$(wc -l <README.md)
  if [ "$lines" -gt "$max_readme_lines" ]; then
    echo "check-docs: README.md has $lines lines, at most $max_readme_lines: move the rest to docs/" >&2
    status=1
  fi
else
  echo "check-docs: README.md is missing" >&2
  status=1
fi

perl -CSD -Mutf8 -e '
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;

my %slugs;     # file => { slug => 1 }
my $broken = 0;

# The text of a file with fenced code blocks blanked (their lines kept, so
# line numbers stay right).
sub unfenced {
  my ($file) = @_;
  open(my $in, "<", $file) or return undef;
  my ($text, $fence) = ("", "");
  while (my $line = <$in>) {
    if ($fence eq "" && $line =~ /^ {0,3}(`{3,}|~{3,})/) {
      $fence = $1;
      $text .= "\n";
    } elsif ($fence ne "" && $line =~ /^ {0,3}\Q$fence\E\s*$/) {
      $fence = "";
      $text .= "\n";
    } else {
      $text .= $fence eq "" ? $line : "\n";
    }
  }
  close($in);
  return $text;
}

sub slugs_of {
  my ($file) = @_;
  return $slugs{$file} if exists $slugs{$file};
  my %seen;
  my $text = unfenced($file) // "";
  for my $line (split /\n/, $text) {
    next unless $line =~ /^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$/;
    my $heading = $1;
    $heading =~ s/!?\[([^\]]*)\]\([^)]*\)/$1/g;   # links and images: their text
    $heading =~ s/<[^>]+>//g;                      # inline HTML tags
    $heading =~ s/[`*]//g;                         # code and emphasis marks
    $heading =~ s/(^|\s)_+|_+(\s|$)/$1$2/g;        # _emphasis_, not snake_case
    my $slug = lc $heading;
    $slug =~ s/[^\p{L}\p{N}\p{M} _-]//g;
    $slug =~ s/ /-/g;
    my $unique = $slug;
    $unique = $slug . "-" . $seen{$slug} if exists $seen{$slug};
    $seen{$slug}++;
    $seen{$unique} //= 1 if $unique ne $slug;
    $slugs{$file}{$unique} = 1;
  }
  # Explicit HTML anchors count too.
  while ($text =~ /<a\s+(?:name|id)="([^"]+)"/g) { $slugs{$file}{$1} = 1; }
  return $slugs{$file} //= {};
}

for my $file (@ARGV) {
  my $text = unfenced($file);
  if (!defined $text) { print STDERR "check-docs: $file cannot be read\n"; $broken = 1; next; }
  # Inline code is no link: blank it, keeping its length and newlines.
  $text =~ s/(`+)(.+?)\1/my $s = $1 . $2 . $1; $s =~ s{[^\n]}{ }g; $s/gse;
  my @targets;
  # [text](target "title") and ![alt](target), the text possibly over lines.
  while ($text =~ /!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g) {
    push @targets, [$2, substr($text, 0, $-[0]) =~ tr/\n//];
  }
  # [label]: target
  while ($text =~ /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/mg) {
    push @targets, [$1, substr($text, 0, $-[0]) =~ tr/\n//];
  }
  for my $t (@targets) {
    my ($target, $line) = ($t->[0], $t->[1] + 1);
    next if $target =~ m{^[A-Za-z][A-Za-z0-9+.-]*:} || $target =~ m{^//};
    my ($path, $anchor) = $target =~ /^([^#]*)(?:#(.*))?$/;
    my $where = "$file:$line: link \"$target\"";
    if ($path eq "" && !defined $anchor) { print STDERR "check-docs: $where is empty\n"; $broken = 1; next; }
    my $resolved = $file;
    if ($path ne "") {
      $resolved = $path =~ m{^/} ? substr($path, 1) : File::Spec->catfile(dirname($file), $path);
      $resolved = File::Spec->canonpath($resolved);
      1 while $resolved =~ s{(^|/)(?!\.\./)[^/]+/\.\.(/|$)}{$1}; # a/../b -> b
      $resolved = "." if $resolved eq "";
      if ($resolved =~ m{^\.\./} || !-e $resolved) {
        print STDERR "check-docs: $where: $resolved does not exist\n";
        $broken = 1;
        next;
      }
    }
    next unless defined $anchor && $anchor ne "";
    if ($resolved !~ /\.md$/i || -d $resolved) {
      print STDERR "check-docs: $where: an anchor into $resolved, which is not a markdown file\n";
      $broken = 1;
      next;
    }
    if (!slugs_of($resolved)->{$anchor}) {
      print STDERR "check-docs: $where: $resolved has no heading whose anchor is #$anchor\n";
      $broken = 1;
    }
  }
}
exit $broken;
' "$@" || status=1

[ $status -eq 0 ] && echo "check-docs: README.md within $max_readme_lines lines; every relative link and anchor of $* resolves"
exit $status
