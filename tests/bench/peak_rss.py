#!/usr/bin/env python3
# Runs COMMAND (its stdin, stdout and stderr are this script's) and writes its own peak resident
# memory and CPU seconds, as the kernel accounted them to that one process (wait4), to OUT:
# "maxrss_kib user_seconds system_seconds". Exits with the command's exit code.
#   peak_rss.py OUT COMMAND [ARGS...]
import os
import sys

out, cmd = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
with open(out, "w") as f:
    f.write("%d %.3f %.3f\n" % (ru.ru_maxrss, ru.ru_utime, ru.ru_stime))
sys.exit(os.waitstatus_to_exitcode(status))
