"""S3 clients against a real S3 server (SeaweedFS's ``weed mini`` on 127.0.0.1): which one
the tiered storage's S3Storage uses.

For each client (boto3; obstore, the Rust object_store crate; and S3Storage itself, on
obstore, to see what the wrapper costs) and each size (1 MiB, 64 MiB by default),
PUT then GET the same object ``--repeats`` times, rounds interleaved across clients so
the machine's load falls on all alike. Printed: MiB/s median [min .. max] per client and
operation, and each client's ratio to boto3 in the same run.

    .venv/bin/python bench/s3_clients.py [--repeats 5] [--sizes 1,64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from tidelog.testing.seaweedfs import SeaweedFS

Op = Callable[[str, bytes], None]
Get = Callable[[str], bytes]


def boto3_ops(s3: SeaweedFS, bucket: str) -> tuple[Op, Get]:
    client = s3.client()

    def put(key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=data)

    def get(key: str) -> bytes:
        return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())

    return put, get


def obstore_ops(s3: SeaweedFS, bucket: str) -> tuple[Op, Get]:
    import obstore
    from obstore.store import S3Store

    store = S3Store(bucket, endpoint=s3.endpoint_url, region=s3.region,
                    access_key_id=s3.access_key_id, secret_access_key=s3.secret_access_key,
                    virtual_hosted_style_request=False, client_options={"allow_http": True})

    def put(key: str, data: bytes) -> None:
        obstore.put(store, key, data)

    def get(key: str) -> bytes:
        return bytes(obstore.get(store, key).bytes())

    return put, get


def s3storage_ops(s3: SeaweedFS, bucket: str) -> tuple[Op, Get]:
    from tidelog.storage.remote.factory import create_remote_storage_manager  # noqa: F401
    from tidelog.storage.remote.s3 import S3Storage

    storage = S3Storage(bucket=bucket, endpoint_url=s3.endpoint_url, region=s3.region,
                        path_style_access=True, access_key_id=s3.access_key_id,
                        secret_access_key=s3.secret_access_key)

    def put(key: str, data: bytes) -> None:
        storage.upload(key, data)

    return put, storage.fetch


CLIENTS = {"boto3": boto3_ops, "obstore": obstore_ops, "S3Storage(obstore)": s3storage_ops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="1,64", help="object sizes in MiB")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[tuple[str, str, int], list[float]] = {}
    with SeaweedFS() as s3:
        s3.create_bucket("bench")
        ops = {name: make(s3, "bench") for name, make in CLIENTS.items()}
        for size in sizes:
            data = os.urandom(size << 20)
            for rep in range(args.repeats):
                for name, (put, get) in ops.items():
                    key = f"{name}/{size}/{rep}"
                    t0 = time.perf_counter()
                    put(key, data)
                    t1 = time.perf_counter()
                    got = get(key)
                    t2 = time.perf_counter()
                    assert got == data, f"{name}: GET gave other bytes"
                    results.setdefault((name, "put", size), []).append(size / (t1 - t0))
                    results.setdefault((name, "get", size), []).append(size / (t2 - t1))
    print(f"load average {os.getloadavg()[0]:.2f}; MiB/s median [min .. max] over {args.repeats}")
    for size in sizes:
        for op in ("put", "get"):
            base = statistics.median(results[("boto3", op, size)])
            for name in CLIENTS:
                r = results[(name, op, size)]
                med = statistics.median(r)
                print(f"{size:>3} MiB {op}  {name:<17} {med:8.1f} [{min(r):7.1f} .. {max(r):7.1f}]"
                      f"  x{med / base:.2f} of boto3")


if __name__ == "__main__":
    main()
