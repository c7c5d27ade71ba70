"""A disk that fails on demand, for log dir failure tests: an ext4 file system on a loop device
whose backing file lies on a small tmpfs.  Filling that tmpfs (``break_``) makes the device's
writes fail; the kernel then reports the lost writes at the next fsync ("lost async page
write"), as it reports a dying disk.  Needs root and loop devices: ``setup`` skips the test
without them."""
from __future__ import annotations

import os
import subprocess

import pytest


class FailingDisk:
    """ext4 on a loop device backed by a sparse file on a small tmpfs."""

    def __init__(self, root):
        self.backing = root / "backing"
        self.mount_point = root / "disk"
        self.loop = None

    def _run(self, *argv):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
        return r.stdout.strip()

    def setup(self):
        if os.geteuid() != 0:
            pytest.skip("a loop device needs root")
        self.backing.mkdir()
        self.mount_point.mkdir()
        try:
            self._run("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(self.backing))
            image = self.backing / "disk.img"
            with open(image, "wb") as f:
                f.truncate(64 << 20)
            self.loop = self._run("losetup", "-f", "--show", str(image))
            self._run("mkfs.ext4", "-q", self.loop)
            self._run("mount", self.loop, str(self.mount_point))
        except (RuntimeError, FileNotFoundError) as e:
            self.cleanup()
            pytest.skip(f"no failing disk here: {e}")
        return self

    def break_(self):
        """Fill the tmpfs under the device: from now on its writes fail."""
        with open(self.backing / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
            except OSError:
                pass

    def cleanup(self):
        subprocess.run(["umount", "-l", str(self.mount_point)], capture_output=True)
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
        subprocess.run(["umount", "-l", str(self.backing)], capture_output=True)
