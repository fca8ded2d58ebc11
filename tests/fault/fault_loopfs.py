"""Small real file systems for fault tests: an image file formatted ext4 or xfs and
loop-mounted (root only; the test is skipped with the reason where mounting is impossible)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MKFS = {"ext4": ["mkfs.ext4", "-q", "-F", "-m", "0"], "xfs": ["mkfs.xfs", "-q", "-f"]}
# xfsprogs refuses file systems below 300 MiB; the image is sparse, so it costs little.
MIN_MB = {"ext4": 1, "xfs": 300}


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def require_mount(fstype: str) -> None:
    """Skip (with the reason) unless this process can format and loop-mount ``fstype``."""
    if os.geteuid() != 0:
        pytest.skip("loop-mounting a file system needs root (CI runs as root)")
    for tool in (MKFS[fstype][0], "mount", "umount", "losetup"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (.ci/run installs xfsprogs e2fsprogs)")
    if fstype == "xfs" and shutil.which("xfs_io") is None:
        pytest.skip("xfs_io is not installed (xfsprogs)")


class LoopFs:
    def __init__(self, image: Path, mountpoint: Path, fstype: str) -> None:
        self.image = image
        self.mountpoint = mountpoint
        self.fstype = fstype

    def mount(self) -> None:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        res = _run("mount", "-t", self.fstype, "-o", "loop", str(self.image), str(self.mountpoint))
        if res.returncode != 0:
            pytest.skip(f"cannot loop-mount a {self.fstype} image here: {res.stderr.strip()}")

    def umount(self) -> None:
        res = _run("umount", str(self.mountpoint))
        if res.returncode != 0:  # something still holds it: detach lazily, never leak a mount
            _run("umount", "-l", str(self.mountpoint))

    def grow(self, size_mb: int) -> None:
        """Free space the way an operator does: a bigger device (unmounted, then remounted)."""
        self.umount()
        os.truncate(self.image, size_mb * 1024 * 1024)
        if self.fstype == "ext4":
            _run("e2fsck", "-f", "-p", str(self.image))
            res = _run("resize2fs", str(self.image))
            assert res.returncode == 0, res.stderr
            self.mount()
        else:
            self.mount()
            res = _run("xfs_growfs", str(self.mountpoint))
            assert res.returncode == 0, res.stderr

    def shutdown(self) -> None:
        """Fail the file system under its users (every later I/O answers EIO)."""
        res = _run("xfs_io", "-x", "-c", "shutdown", str(self.mountpoint))
        assert res.returncode == 0, res.stderr

    def cycle(self) -> None:
        """Unmount and mount again (after a shutdown: xfs replays its log)."""
        self.umount()
        self.mount()


@contextmanager
def loop_fs(tmp_path: Path, fstype: str = "ext4", size_mb: int = 16) -> Iterator[LoopFs]:
    require_mount(fstype)
    size_mb = max(size_mb, MIN_MB[fstype])
    image = tmp_path / f"{fstype}.img"
    with open(image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    res = _run(*MKFS[fstype], str(image))
    if res.returncode != 0:
        pytest.skip(f"mkfs.{fstype} failed: {res.stderr.strip()}")
    fs = LoopFs(image, tmp_path / f"{fstype}-mnt", fstype)
    fs.mount()
    try:
        yield fs
    finally:
        fs.umount()
