"""Streaming aggregation from one topic into a compacted topic (latest count per key).

    python examples/streaming_to_compacted_topic.py --bootstrap 127.0.0.1:9092 \
        --source clicks --target click-counts --checkpoint /tmp/ckpt-click-counts

Reads ``clicks`` as it grows, counts records per key, and writes every changed count to
``click-counts`` through foreachBatch in update mode (created with cleanup.policy=compact, so the topic converges to one record
per key: a changelog any consumer can rebuild the table from). The checkpoint keeps Spark's
offsets and aggregation state; ``commitOffsetsToGroup`` also shows the progress to Kafka lag
tools. Pass ``--available-now`` to process what is there and stop.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def ensure_compacted_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from tidelog.client.kafka_client import KafkaClient, KafkaClientError

    with KafkaClient(bootstrap) as client:
        try:
            client.create_topics({topic: partitions}, configs={topic: {"cleanup.policy": "compact"}})
        except KafkaClientError as e:
            if e.error.name.upper() != "TOPIC_ALREADY_EXISTS":
                raise


def start(spark: Any, *, bootstrap: str, source: str, target: str, checkpoint: str,
          available_now: bool = False, max_offsets_per_trigger: int = 100_000) -> Any:
    ensure_compacted_topic(bootstrap, target)
    counts = (
        spark.readStream.format("tidelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .option("commitOffsetsToGroup", f"spark-{target}")
        .load()
        .where("key IS NOT NULL")  # a compacted topic rejects records without a key
        .groupBy("key")
        .count()
        .selectExpr("key", "CAST(count AS STRING) AS value")
    )

    def write_changes(changed: Any, batch_id: int) -> None:
        # Python stream sinks take append/complete only; "update" goes through foreachBatch
        (changed.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", target).mode("append").save())

    writer = (counts.writeStream.outputMode("update").foreachBatch(write_changes)
              .option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="5 seconds")
    return writer.start()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--available-now", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.spark

    spark = SparkSession.builder.master("local[*]").config("spark.sql.shuffle.partitions", "4").getOrCreate()
    tidelog.spark.register(spark)
    query = start(spark, bootstrap=args.bootstrap, source=args.source, target=args.target,
                  checkpoint=args.checkpoint, available_now=args.available_now)
    query.awaitTermination()


if __name__ == "__main__":
    main()
