"""An exactly-once streaming pipeline: topic -> transformation -> topic, with no loss and no
duplicates for read_committed readers across broker restarts and query restarts.

    python examples/exactly_once_pipeline.py --bootstrap 127.0.0.1:9092 \
        --source orders --target orders-upper --checkpoint /tmp/ckpt-orders-upper

The source is read with ``kafka.isolation.level=read_committed`` (only committed input), and
the sink writes each task's part of every micro-batch in one Kafka transaction
(``kafka.transactional.id``), committing with it a marker that makes a re-run of the same
micro-batch write nothing (see docs/spark.md, "Exactly-once"). Kill it, restart the broker,
start it again with the same checkpoint: consumers with isolation.level=read_committed see
every input record in the target exactly once. Pass ``--available-now`` to process what is
there and stop.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def start(spark: Any, *, bootstrap: str, source: str, target: str, checkpoint: str,
          transactional_id: str, available_now: bool = False, max_offsets_per_trigger: int = 10_000,
          processing_time: str = "1 second") -> Any:
    upper = (
        spark.readStream.format("tidelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
    )
    writer = (
        upper.writeStream.format("tidelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("kafka.transactional.id", transactional_id)  # one id per query
        .option("checkpointLocation", checkpoint)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=processing_time)
    return writer.start()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--transactional-id", default=None, help="default: exactly-once-<target>")
    ap.add_argument("--available-now", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.spark

    spark = SparkSession.builder.appName("tidelog-exactly-once").getOrCreate()
    tidelog.spark.register(spark)
    query = start(spark, bootstrap=args.bootstrap, source=args.source, target=args.target,
                  checkpoint=args.checkpoint, transactional_id=args.transactional_id or f"exactly-once-{args.target}",
                  available_now=args.available_now)
    query.awaitTermination()


if __name__ == "__main__":
    main()
