"""A real parityd on loopback for the Python tests (its own data directory, any free port)."""
import os
import shutil
import subprocess
import tempfile
import time


def _read(path):
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read().strip()


class Daemon:
    def __init__(self, build, *args, port=0, data_dir=None):
        self.build = build
        self.work = tempfile.mkdtemp(prefix="parity-py-")
        self.data_dir = data_dir or os.path.join(self.work, "data")
        self.args = list(args)
        self.proc = None
        self.start(port)

    def start(self, port=0):
        port_file = os.path.join(self.work, "port")
        if os.path.exists(port_file):
            os.remove(port_file)
        self.log = open(os.path.join(self.work, "parityd.log"), "a")
        self.proc = subprocess.Popen(
            [os.path.join(self.build, "server", "parityd"), "--data-dir", self.data_dir,
             "--listen", "127.0.0.1:%d" % port, "--port-file", port_file, *self.args],
            stderr=self.log)
        for _ in range(400):
            if _read(port_file):
                break
            if self.proc.poll() is not None:
                raise RuntimeError("parityd exited: " + _read(os.path.join(self.work, "parityd.log")))
            time.sleep(0.025)
        self.port = int(_read(port_file))
        self.address = "127.0.0.1:%d" % self.port

    def kill(self):
        self.proc.kill()
        self.proc.wait(30)
        self.log.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.log.close()

    def close(self):
        self.stop()
        shutil.rmtree(self.work, ignore_errors=True)
