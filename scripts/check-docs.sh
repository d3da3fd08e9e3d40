#!/usr/bin/env bash
# Checks the documentation the README points into:
#   - README.md, the front door, is at most 300 lines (the manual is docs/);
#   - every relative markdown link of README.md and docs/*.md resolves: the
#     file or directory exists, and a #anchor (also one into the same file)
#     is the GitHub slug of a heading of the target .md file. Links in
#     fenced code blocks and inline code are not links; http(s), mailto and
#     other URLs with a scheme are not checked.
#   - docs/internals.md's "Code layout" tables name every folder and module
#     of src/: each folder has its row (`src/core/`, `src/core/kinds/`,
#     `src/pg/`, and src/pg's folders by their path from it: `api/`,
#     `storage/table/`); each module, the name of a .cpp or .h without it,
#     is named as code in its folder's row (`x`, `x.h`, `x.cpp`, or a path
#     ending in one); and every `x.h` or `x.cpp` a folder's row names
#     exists (in that folder, or by its path from src/pg, src/ or the top).
# GitHub's slug of a heading: its text without markup (backticks, emphasis,
# link targets), lower-cased, every character that is not a letter, digit,
# mark, space, '-' or '_' removed, each space turned into '-'; the second
# heading of one slug gets "-1", the third "-2", and so on.
# Prints what is wrong and exits 1; needs only perl. Files to check instead
# of README.md and docs/*.md may be given as arguments (the line limit is
# the README's only, the code layout is always checked). After a clean run
# it plants one fault of each kind the code layout check finds in a copy of
# src/ and docs/internals.md, and fails unless each is found;
# CHECK_DOCS_ROOT=dir checks only the code layout of such a copy.
set -euo pipefail
cd "$(dirname "$0")/.."

max_readme_lines=300
status=0

# docs/internals.md's "Code layout" against src/ under root $1 (see above).
check_code_layout() {
  local root=$1
  (cd "$root" && find src -mindepth 1 -type d && find src -name '*.cpp' -o -name '*.h') | sort |
    perl -e '
use strict;
use warnings;
my ($root) = @ARGV;
my $doc = "docs/internals.md";
open(my $in, "<", "$root/$doc") or die "check-docs: $doc cannot be read\n";
my ($in_layout, %rows) = (0);
while (my $line = <$in>) {
  if ($line =~ /^## /) { $in_layout = $line =~ /^## Code layout\s*$/; next; }
  $rows{$1} = $line if $in_layout && $line =~ /^\|\s*`([^`]+?)\/?`\s*\|/;
}
close($in);
my $where = "$doc\x27s \"Code layout\"";
# A folder of src/ and the first cell of its row.
sub row_key {
  my ($dir) = @_;
  return exists $rows{$dir} ? $dir : ($dir =~ m{^src/pg/(.+)$} && exists $rows{$1} ? $1 : undef);
}
my (%folders, %reported, $bad);
while (my $path = <STDIN>) {
  chomp $path;
  if (-d "$root/$path") {
    $folders{$path} = 1;
    next if defined row_key($path);
    print STDERR "check-docs: $where has no row for the folder $path\n";
    $bad = 1;
    next;
  }
  my ($dir, $base) = $path =~ m{^(.*)/([^/]+)\.(?:cpp|h)$} or next;
  my $key = row_key($dir);
  next unless defined $key;  # the folder is reported
  my @names = $rows{$key} =~ /`([^`]+)`/g;
  next if $reported{"$dir/$base"}++ || grep { m{(^|/)\Q$base\E(\.h|\.cpp)?$} } @names;
  print STDERR "check-docs: $dir/$base.*: the module $base is not named in $where row of $key/\n";
  $bad = 1;
}
for my $dir (sort keys %folders) {
  my $key = row_key($dir);
  next unless defined $key;
  for my $name ($rows{$key} =~ /`([\w\/]+\.(?:h|cpp))`/g) {
    next if grep { -f "$root/$_" } ("$dir/$name", "src/pg/$name", "src/$name", $name);
    print STDERR "check-docs: $where row of $key/ names `$name`, which does not exist\n";
    $bad = 1;
  }
}
exit($bad ? 1 : 0);
' "$root" || status=1
  if [ $status -eq 0 ]; then
    echo "check-docs: every folder and module of src/ is in docs/internals.md's \"Code layout\", and every file it names there exists"
  fi
}

if [ -n "${CHECK_DOCS_ROOT:-}" ]; then
  check_code_layout "$CHECK_DOCS_ROOT"
  exit $status
fi

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

check_code_layout "."
[ $status -eq 0 ] || exit $status

# The layout check can fail: each of these plants, in a copy of src/ and
# docs/internals.md, must be found.
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
plant() {
  local what=$1 expect=$2 file=$3 line=${4-}
  rm -rf "$copy/src" "$copy/docs" && cp -r src "$copy/src" && mkdir "$copy/docs" &&
    cp docs/internals.md "$copy/docs/internals.md"
  if [ "$line" = "REMOVE" ]; then
    rm "$copy/$file"
  else
    mkdir -p "$(dirname "$copy/$file")" && echo "$line" >>"$copy/$file"
  fi
  if out=$(CHECK_DOCS_ROOT=$copy "$0" 2>&1); then
    echo "check-docs: the self-test's $what was not found" >&2
    status=1
  elif ! grep -q -- "$expect" <<<"$out"; then
    echo "check-docs: the self-test's $what was not reported as \"$expect\":"$'\n'"$out" >&2
    status=1
  fi
}
plant "module missing from the layout" "stray_module is not named" src/pg/support/stray_module.cpp '// stray'
plant "module named only in another folder's row" "clock is not named" src/pg/config/clock.h '#pragma once'
plant "folder missing from the layout" "no row for the folder src/pg/storage/unlogged" \
  src/pg/storage/unlogged/unlogged_storage.h '#pragma once'
plant "core module missing from the layout" "stray_core is not named" src/core/stray_core.h '#pragma once'
plant "layout naming a file that is gone" "names \`compat.h\`, which does not exist" src/pg/support/compat.h REMOVE
[ $status -eq 0 ] && echo "check-docs: the self-test's 5 planted faults were each found"
exit $status
