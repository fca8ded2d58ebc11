"""The README's Spark snippet works from the venv's interpreter without an activated venv
(PYSPARK_PYTHON unset, ``python3`` on PATH cannot import tidelog). A separate driver
process: its own small SparkSession, since the worker Python is fixed per session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_layout import write_partition

pytestmark = pytest.mark.spark

DRIVER = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .getOrCreate())
import tidelog.spark; tidelog.spark.register(spark); tidelog.spark.register(spark)
df = spark.read.format("tidelog").option("path", sys.argv[1]).option("subscribe", "t").load()
print("ROWS", df.count())
spark.stop()
"""


@pytest.mark.parametrize("venv_on_path", [False, True], ids=["no-venv", "activated-venv"])
def test_readme_snippet_without_an_activated_venv(tmp_path: Path, venv_on_path: bool) -> None:
    """Works either way, and registering (twice) prints no WARN: with the venv's python3 on
    PATH Spark has already registered ``pyspark_tidelog`` statically, and replacing it made
    Spark warn on every register()."""
    write_partition(tmp_path / "logs" / "t-0", [[(1_000_000 + i, None, b"x", [])] for i in range(7)])
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    venv_bin = str(Path(sys.executable).parent)
    rest = [p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(venv_bin)]
    env["PATH"] = os.pathsep.join(([venv_bin] if venv_on_path else []) + rest)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "logs")], env=env, capture_output=True,
                          text=True, timeout=240, check=False)
    assert "ROWS 7" in done.stdout, done.stderr[-3000:]
    assert "replaced a" not in done.stderr and "tidelog" not in _warn_lines(done.stderr)


def _warn_lines(stderr: str) -> str:
    return "\n".join(line for line in stderr.splitlines() if " WARN " in line or "WARNING" in line)
