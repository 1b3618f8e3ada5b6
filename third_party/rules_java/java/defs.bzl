"""rules_java for an offline Bazel 4.2.3: the native Java rules under rules_java's names.

rdmad has no Java; Bazel's own @bazel_tools//tools/jdk package loads this file while resolving toolchains.
"""

java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_runtime = native.java_runtime
java_test = native.java_test
java_toolchain = native.java_toolchain
