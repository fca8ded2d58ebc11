"""Small real file systems for fault tests: an image file formatted ext4 or xfs and
loop-mounted. Root, the tools and a working loop mount are capabilities
(tidelog.testing.capability): missing, the test is skipped with the reason, or fails under CI."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tidelog.testing.capability import require_capability, require_root, require_tools

MKFS = {"ext4": ["mkfs.ext4", "-q", "-F", "-m", "0"], "xfs": ["mkfs.xfs", "-q", "-f"]}
# xfsprogs refuses file systems below 300 MiB; the image is sparse, so it costs little.
MIN_MB = {"ext4": 1, "xfs": 300}


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


PACKAGE = {"ext4": "e2fsprogs", "xfs": "xfsprogs"}


def require_mount(fstype: str) -> None:
    """Root and the tools to format, loop-mount, grow and (xfs) shut down ``fstype``."""
    require_root("loop-mounting a file system")
    require_tools("mount", "umount", "losetup", package="mount")
    tools = ["mkfs.ext4", "e2fsck", "resize2fs"] if fstype == "ext4" else \
        ["mkfs.xfs", "xfs_growfs", "xfs_io"]
    require_tools(*tools, package=PACKAGE[fstype])


class LoopFs:
    def __init__(self, image: Path, mountpoint: Path, fstype: str) -> None:
        self.image = image
        self.mountpoint = mountpoint
        self.fstype = fstype

    def try_mount(self) -> subprocess.CompletedProcess[str]:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        return _run("mount", "-t", self.fstype, "-o", "loop", str(self.image), str(self.mountpoint))

    def mount(self) -> None:
        """Mount again (after a grow or a shutdown): the first mount proved loop mounts
        work here, so a failure now is the file system's, and fails the test."""
        res = self.try_mount()
        assert res.returncode == 0, f"remounting the {self.fstype} image: {res.stderr.strip()}"

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
    require_capability(f"mkfs.{fstype}", res.returncode == 0,
                       f"mkfs.{fstype} failed: {res.stderr.strip()}")
    fs = LoopFs(image, tmp_path / f"{fstype}-mnt", fstype)
    res = fs.try_mount()
    require_capability("loop mount", res.returncode == 0,
                       f"cannot loop-mount a {fstype} image here: {res.stderr.strip()}")
    try:
        yield fs
    finally:
        fs.umount()
