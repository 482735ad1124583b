#!/bin/bash
# procps tools: ps and pgrep link libgpg-error, whose constructor allocates inside bindtextdomain.
# Bounded: a hang fails in a minute, not at the test's timeout.
timeout 60 ps -o pid= -p 1 || exit 1
timeout 60 pgrep -c -x no-such-process-name-0
[ $? -le 1 ] || exit 1
