"""Offline report over a log directory: no broker needed (a copy of a stopped broker's
``log.dirs`` works too).

    python examples/offline_report.py /var/lib/tidelog/data [--topics 'orders|payments']

Prints, per topic-partition: records, offset range, time range and key/value bytes, then the
ten busiest hours across all topics.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def report(spark: Any, log_dirs: str, topics: str = ".*") -> tuple[list[Any], list[Any]]:
    df = (spark.read.format("tidelog").option("path", log_dirs)
          .option("subscribePattern", topics).load())
    per_partition = df.groupBy("topic", "partition").agg(
        {"*": "count", "offset": "min", "timestamp": "min"}
    ).join(
        df.groupBy("topic", "partition").agg({"offset": "max", "timestamp": "max"}), ["topic", "partition"]
    ).join(
        df.selectExpr("topic", "partition", "coalesce(length(key), 0) + coalesce(length(value), 0) AS bytes")
        .groupBy("topic", "partition").sum("bytes"),
        ["topic", "partition"],
    ).orderBy("topic", "partition").collect()
    busiest = (df.selectExpr("date_trunc('hour', timestamp) AS hour").groupBy("hour").count()
               .orderBy("count", ascending=False).limit(10).collect())
    return per_partition, busiest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log_dirs", help="one log dir, or several separated by commas")
    ap.add_argument("--topics", default=".*", help="a regex of topics (default: all)")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.spark

    spark = SparkSession.builder.master("local[*]").config("spark.sql.session.timeZone", "UTC").getOrCreate()
    tidelog.spark.register(spark)
    per_partition, busiest = report(spark, args.log_dirs, args.topics)
    print(f"{'topic-partition':30} {'records':>10} {'offsets':>21} {'bytes':>12}  first .. last timestamp")
    for r in per_partition:
        offsets = f"{r['min(offset)']}..{r['max(offset)']}"
        print(f"{r.topic + '-' + str(r.partition):30} {r['count(1)']:>10} {offsets:>21} {r['sum(bytes)']:>12}"
              f"  {r['min(timestamp)']} .. {r['max(timestamp)']}")
    print("busiest hours:")
    for r in busiest:
        print(f"  {r.hour}  {r['count']}")


if __name__ == "__main__":
    main()
