#!/bin/sh
# subcommands.sh PROGRAM: a help2man --include file for PROGRAM (slotd,
# slotctl) with a COMMANDS section that holds each subcommand's own --help,
# as `PROGRAM SUB --help` prints it, so the man page says what --help says.
set -eu
program=$1
name=${program##*/}
# The subcommands: the first word of each line of --help's "Subcommands:" section.
subs=$("$program" --help | sed -n '/^Subcommands:$/,/^$/p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
printf '[COMMANDS]\n'
printf 'Each subcommand has its own \\fB\\-\\-help\\fR; here is what it prints.\n'
for sub in $subs; do
  printf '.SS "%s %s"\n.nf\n' "$name" "$sub"
  # The exit statuses that every subcommand repeats are left to the page's
  # own section. roff: a backslash is \e, a minus \-, and a line must not
  # start with . or '.
  "$program" "$sub" --help | sed -e '/^Exit status:$/,$d' \
      -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\([.']\)/\\\\\&\1/" -e "s|^Usage: [^ ]*/$name |Usage: $name |"
  printf '.fi\n'
done
