#!/usr/bin/env bash
# CI for the Java bindings, against an already built CMake build directory:
#   1. the generated overloads (ArrayCollectives.java) match their generator;
#   2. mvn install in bindings/java: the full `verify` lifecycle (JNI library
#      through CMake - a no-op on an up-to-date build dir -, JUnit 5 tests via
#      Surefire, jar with the stripped native/linux-x86_64/ libraries, sources
#      and javadoc jars with doclint), then the jars into the local Maven
#      repository (for step 4) and deployed to a temporary file:// repository
#      (for step 3);
#   3. the artifact as users get it (tools/test-artifact.sh): a fresh project
#      outside the checkout resolves it by coordinates from that repository
#      and runs the 4-rank tutorial programs of examples/java under
#      omniccl-run with no library path set, their output compared with the
#      one documented in each source (examples/check_output.sh); the native
#      libraries in the jar are checked stripped and under a size bound;
#   4. examples/java: the Spark barrier-mode pipeline in local mode, with an
#      injected failure in the first stage attempt.
#
# Usage: bindings/java/ci.sh BUILD_DIR      (e.g. build-ci, built by scripts/test-all.sh)
#
# Needs a JDK 17+, Maven 3.8+, swig, and Maven Central (dependencies are
# cached in ~/.m2; the first run downloads Spark, ~200 MB). Exits non-zero if
# any step or test fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:?usage: bindings/java/ci.sh BUILD_DIR}")
mvn=(mvn -B -ntp -Domniccl.build.dir="$build")
start=$SECONDS

echo "== java: $(java -version 2>&1 | head -1), $(mvn -B -v 2>/dev/null | head -1)"
python3 bindings/java/tools/gen_collectives.py --check

dist=$(mktemp -d "${TMPDIR:-/tmp}/omniccl-dist-XXXXXX")
trap 'rm -rf "$dist"' EXIT
echo "== mvn install (verify: native build, tests, jars) in bindings/java, deploy to $dist"
(cd bindings/java && "${mvn[@]}" install deploy:deploy -DaltDeploymentRepository="omniccl-dist::file://$dist")

echo "== the artifact in a fresh project: tutorial programs, 4 ranks"
bindings/java/tools/test-artifact.sh "$dist" "$build/tools/omniccl-run"

echo "== examples/java: build"
(cd examples/java && "${mvn[@]}" -q package dependency:build-classpath \
  -Dmdep.outputFile=target/classpath.txt)
cp="examples/java/target/classes:$(cat examples/java/target/classpath.txt)"

echo "== examples/java: Spark barrier-mode pipeline (local[4], first stage attempt fails)"
# The module openings Spark's own launcher passes on Java 17.
opens=()
for p in java.lang java.lang.invoke java.lang.reflect java.io java.net java.nio java.util \
         java.util.concurrent java.util.concurrent.atomic sun.nio.ch sun.nio.cs \
         sun.security.action sun.util.calendar; do
  opens+=("--add-opens=java.base/$p=ALL-UNNAMED")
done
status=0
out=$(SPARK_LOCAL_IP=127.0.0.1 timeout 300 java "${opens[@]}" -cp "$cp" \
  org.omniccl.examples.SparkHistogram --fail-first-attempt 2>&1 </dev/null) || status=$?
if [ $status -ne 0 ]; then
  printf '%s\n' "$out"
  echo "FAIL: the Spark example exited with status $status" >&2
  exit 1
fi
printf '%s\n' "$out" | grep '^spark: '
printf '%s\n' "$out" | grep -q '^spark: OK: ' || { echo "FAIL: no 'spark: OK' line" >&2; exit 1; }
echo "== java: all passed in $((SECONDS - start)) s"
