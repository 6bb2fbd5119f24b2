"""Only the compiled extensions live here (the record codec, the metadata record reader, the
image entries' untracking, the protocol's shape check); all metadata is in pyproject.toml."""

from setuptools import Extension, setup

FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]

setup(
    ext_modules=[
        Extension("kraft.records._codec", sources=["src/kraft/records/_codec.c"], extra_compile_args=FLAGS),
        Extension("kraft.metadata._fields", sources=["src/kraft/metadata/_fields.c"], extra_compile_args=FLAGS),
        Extension("kraft.metadata._collector", sources=["src/kraft/metadata/_collector.c"],
                  extra_compile_args=FLAGS),
        Extension("kraft.protocol._shape", sources=["src/kraft/protocol/_shape.c"],
                  extra_compile_args=FLAGS),
    ]
)
