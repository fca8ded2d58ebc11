"""Load a CSV or Parquet data set into a topic: one record per row, the row as JSON value.

    python examples/load_csv_to_topic.py data.csv --bootstrap 127.0.0.1:9092 --topic orders --key id

The key column (optional) drives Kafka's default partitioner, so rows with the same key land in
the same partition. Delivery is at-least-once (a re-run Spark task produces its rows again).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def load(spark: Any, source: str, *, bootstrap: str, topic: str, key: str | None = None,
         compression: str = "lz4") -> int:
    from pyspark.sql import functions as F

    reader = spark.read.option("header", "true").option("inferSchema", "true")
    df = reader.parquet(source) if source.endswith(".parquet") else reader.csv(source)
    out = df.select(
        (F.col(key).cast("string") if key else F.lit(None).cast("string")).alias("key"),
        F.to_json(F.struct(*df.columns)).alias("value"),
    )
    (out.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
        .option("kafka.compression.type", compression).mode("append").save())
    return int(df.count())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="a .csv file/dir or a .parquet file/dir")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--key", help="column to use as the record key")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.spark

    spark = SparkSession.builder.master("local[*]").getOrCreate()
    tidelog.spark.register(spark)
    print(f"{load(spark, args.source, bootstrap=args.bootstrap, topic=args.topic, key=args.key)} rows produced")


if __name__ == "__main__":
    main()
