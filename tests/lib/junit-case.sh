#!/usr/bin/env bash
# Writes a one-test-case JUnit/gtest-style XML file, so checks made by scripts count in the summary.
# Usage: junit-case.sh FILE SUITE CASE [FAILURE_MESSAGE]   (no message: the case passed)
set -euo pipefail
file=$1 suite=$2 case=$3 message=${4:-}
esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"$1"; }
{
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo "<testsuites tests=\"1\" failures=\"$([ -n "$message" ] && echo 1 || echo 0)\" name=\"$suite\">"
  echo "  <testsuite name=\"$suite\" tests=\"1\">"
  if [ -n "$message" ]; then
    echo "    <testcase name=\"$case\"><failure message=\"$(esc "$message")\"/></testcase>"
  else
    echo "    <testcase name=\"$case\"/>"
  fi
  echo '  </testsuite>'
  echo '</testsuites>'
} >"$file"
