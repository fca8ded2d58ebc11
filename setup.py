"""Build configuration beside pyproject.toml: only the optional native core.

The extension is ``optional``: without a C compiler the install still succeeds and tidelog
runs its pure-Python twins (see tidelog._native).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tidelog._native._core",
            sources=[
                "src/tidelog/_native/_core.c",
                "src/tidelog/_native/md5.c",
                "src/tidelog/_native/offset_map.c",
                "src/tidelog/_native/recovery.c",
                "src/tidelog/_native/cleaner_runs.c",
                "src/tidelog/_native/cleaner_plain.c",
                "src/tidelog/_native/spark_fields.c",
                "src/tidelog/_native/spark_columns.c",
                "src/tidelog/_native/spark_runs.c",
                "src/tidelog/_native/fetch_scan.c",
                "src/tidelog/_native/fetch_read.c",
                "src/tidelog/_native/validate_plain.c",
                "src/tidelog/_native/slotted_new.c",
                "src/tidelog/_native/append_leader.c",
                "src/tidelog/_native/append_attrs.c",
                "src/tidelog/_native/append_segment.c",
                "src/tidelog/_native/append_index.c",
                "src/tidelog/_native/json_columns.c",
                "src/tidelog/_native/json_text.c",
                "src/tidelog/_native/json_number.c",
                "src/tidelog/_native/schema_ids.c",
                "src/tidelog/_native/proto_wire.c",
                "src/tidelog/_native/avro_columns.c",
                "src/tidelog/_native/proto_columns.c",
                "src/tidelog/_native/proto_plan.c",
                "src/tidelog/_native/append_plain.c",
                "src/tidelog/_native/produce_decode.c",
                "src/tidelog/_native/produce_encode.c",
                "src/tidelog/_native/produce_now.c",
                "src/tidelog/_native/produce_after.c",
                "src/tidelog/_native/take_now.c",
                "src/tidelog/_native/attr_hint.c",
            ],
            depends=["src/tidelog/_native/native.h", "src/tidelog/_native/cleaner_plain.h",
                     "src/tidelog/_native/json_text.h", "src/tidelog/_native/proto_columns.h",
                     "src/tidelog/_native/proto_varint.h", "src/tidelog/_native/append_leader.h",
                     "src/tidelog/_native/attr_hint.h",
                     "src/tidelog/_native/produce_now.h"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension("tidelog._native._stages", ["src/tidelog/_native/request_stages.c"],
                  extra_compile_args=["-O2"], optional=True),
    ]
)
