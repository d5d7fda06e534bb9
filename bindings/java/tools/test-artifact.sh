#!/usr/bin/env bash
# Tests org.omniccl:omniccl the way a user gets it: from a Maven repository,
# by its coordinates only, in a fresh project outside the checkout.
#
#   1. A temporary Maven project (its own local repository, so neither another
#      checkout's `mvn install` nor an old copy in ~/.m2 can stand in) resolves
#      the jar and its sources and javadoc jars from REPO_DIR (ci.sh deploys
#      them there) and compiles the tutorial programs of examples/java.
#   2. The jar carries the two native libraries for linux-x86_64, stripped,
#      each under a size bound (below); the sources and javadoc jars hold the
#      facade's sources and pages.
#   3. The tutorial programs run on 4 ranks under omniccl-run, their output
#      compared with the one documented in each source (check_output.sh),
#      with no LD_LIBRARY_PATH and no java.library.path: the jar loads the
#      libraries it carries, which one more program checks in /proc/self/maps.
#
# Usage: bindings/java/tools/test-artifact.sh REPO_DIR OMNICCL_RUN
#
# Plugins (compiler, resources) come from ~/.m2, read as a file:// repository
# (the bindings/java build put them there), with Maven Central behind it.
set -euo pipefail
repo=$(realpath "${1:?usage: test-artifact.sh REPO_DIR OMNICCL_RUN}")
run=$(realpath "${2:?usage: test-artifact.sh REPO_DIR OMNICCL_RUN}")
src=$(cd "$(dirname "$0")/../../.." && pwd)
version=$(sed -n 's:^  <version>\(.*\)</version>$:\1:p' "$src/bindings/java/pom.xml" | head -n 1)
examples="$src/examples/java/src/main/java/org/omniccl/examples"
tutorials=(Broadcast Scatter Gather Reduce AllReduce AllGather Tagged)

# Size bounds of the stripped libraries in the jar, measured with GCC 12,
# RelWithDebInfo (-O2): libomniccl.so.1 is 1.9 MB without CUDA and 4.5 MB with
# it (CI's build: sm_90 code and PTX, 1.6 MB, and the static CUDA runtime);
# unstripped it is 30 to 37 MB. libomniccl_jni.so is 52 KB (190 KB
# unstripped). The bounds leave room to grow and still fail on debug
# information that slipped back in; the section check below catches a
# missed strip of either library.
max_core=$((8 * 1024 * 1024))
max_jni=$((256 * 1024))

tmp=$(mktemp -d "${TMPDIR:-/tmp}/omniccl-artifact-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
proj="$tmp/consumer"
mkdir -p "$proj/src/main/java/org/omniccl/examples" "$proj/src/main/java/com/example"

# Where the artifact comes from is the settings' business, as for a user of
# a company repository: the project names coordinates only. omniccl-dist is
# listed first, so it supplies org.omniccl:omniccl even though ~/.m2 may
# hold another copy.
cat >"$tmp/settings.xml" <<EOF
<settings>
  <localRepository>$tmp/m2</localRepository>
  <profiles>
    <profile>
      <id>test-artifact</id>
      <repositories>
        <repository>
          <id>omniccl-dist</id>
          <url>file://$repo</url>
          <snapshots><enabled>false</enabled></snapshots>
        </repository>
        <repository>
          <id>m2-cache</id>
          <url>file://$HOME/.m2/repository</url>
        </repository>
      </repositories>
      <pluginRepositories>
        <pluginRepository>
          <id>m2-cache</id>
          <url>file://$HOME/.m2/repository</url>
        </pluginRepository>
      </pluginRepositories>
    </profile>
  </profiles>
  <activeProfiles><activeProfile>test-artifact</activeProfile></activeProfiles>
</settings>
EOF

# The sources and javadoc jars are test-scoped dependencies only so that the
# build resolves them (test-compile) without putting them on a class path.
cat >"$proj/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.example</groupId>
  <artifactId>omniccl-consumer</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.omniccl</groupId>
      <artifactId>omniccl</artifactId>
      <version>$version</version>
    </dependency>
    <dependency>
      <groupId>org.omniccl</groupId>
      <artifactId>omniccl</artifactId>
      <version>$version</version>
      <classifier>sources</classifier>
      <scope>test</scope>
    </dependency>
    <dependency>
      <groupId>org.omniccl</groupId>
      <artifactId>omniccl</artifactId>
      <version>$version</version>
      <classifier>javadoc</classifier>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-resources-plugin</artifactId>
        <version>3.3.1</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.12.1</version>
      </plugin>
    </plugins>
  </build>
</project>
EOF
cp "$examples/Example.java" "$proj/src/main/java/org/omniccl/examples/"
for ex in "${tutorials[@]}"; do
  cp "$examples/$ex.java" "$proj/src/main/java/org/omniccl/examples/"
done
# Prints where the JVM mapped the JNI library from.
cat >"$proj/src/main/java/com/example/LoadedFrom.java" <<'EOF'
package com.example;

import java.nio.file.Files;
import java.nio.file.Path;

public final class LoadedFrom {
  public static void main(String[] args) throws Exception {
    org.omniccl.UniqueId.create(); // the first native call loads the library
    for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
      int at = line.indexOf('/');
      if (at >= 0 && line.contains("libomniccl_jni.so")) {
        System.out.println("loaded from: " + line.substring(at));
        return;
      }
    }
    System.out.println("loaded from: nowhere");
  }
}
EOF

echo "== artifact: fresh project in $proj, org.omniccl:omniccl:$version from $repo"
(cd "$proj" && timeout 300 mvn -B -ntp -q -s "$tmp/settings.xml" test-compile)
resolved_in=$SECONDS

art="$tmp/m2/org/omniccl/omniccl/$version"
jar="$art/omniccl-$version.jar"
fail() { echo "FAIL: $*" >&2; exit 1; }
# The copy resolved must be the deployed one, not one from ~/.m2.
cmp -s "$jar" "$repo/org/omniccl/omniccl/$version/omniccl-$version.jar" ||
  fail "the resolved $jar is not the one deployed to $repo"
# check_lib NAME MAX: NAME is in the jar, stripped, at most MAX bytes.
check_lib() {
  local f="$tmp/lib/native/linux-x86_64/$1" size sections
  [ -f "$f" ] || fail "the jar has no native/linux-x86_64/$1"
  size=$(stat -c %s "$f")
  # Captured first: grep -q stopping early would fail the pipeline (pipefail).
  sections=$(readelf -S "$f")
  if grep -qE '\.symtab|\.debug_' <<<"$sections"; then
    fail "$1 in the jar is not stripped (has .symtab or .debug_* sections)"
  fi
  ((size <= $2)) || fail "$1 in the jar is $size bytes, over the bound of $2"
  echo "artifact: native/linux-x86_64/$1: $size bytes, stripped (bound $2)"
}
(mkdir -p "$tmp/lib" && cd "$tmp/lib" && unzip -q "$jar" 'native/*')
check_lib libomniccl.so.1 "$max_core"
check_lib libomniccl_jni.so "$max_jni"
listing=$(unzip -l "$art/omniccl-$version-sources.jar")
grep -q ' org/omniccl/Communicator\.java$' <<<"$listing" ||
  fail "the sources jar has no org/omniccl/Communicator.java"
listing=$(unzip -l "$art/omniccl-$version-javadoc.jar")
grep -q ' org/omniccl/Communicator\.html$' <<<"$listing" ||
  fail "the javadoc jar has no org/omniccl/Communicator.html"
echo "artifact: jar $(stat -c %s "$jar") bytes, sources and javadoc jars present"

# Nothing of the caller's environment may lead the JVM to a library.
clean=(env -u LD_LIBRARY_PATH -u LD_PRELOAD -u CLASSPATH -u JAVA_TOOL_OPTIONS
       -u JDK_JAVA_OPTIONS -u _JAVA_OPTIONS)
cp="$proj/target/classes:$jar"
out=$("${clean[@]}" timeout 60 java -cp "$cp" com.example.LoadedFrom)
echo "artifact: $out"
extracted='^loaded from: /.*/omniccl-native-[^/]*/libomniccl_jni\.so'
[[ $out =~ $extracted ]] ||
  fail "the JNI library was not loaded from the jar's extraction directory"

echo "== artifact: tutorial programs, 4 ranks"
for ex in "${tutorials[@]}"; do
  "${clean[@]}" bash "$src/examples/check_output.sh" "$examples/$ex.java" \
    -- "$run" -n 4 --timeout 120 java -XX:TieredStopAtLevel=1 -cp "$cp" "org.omniccl.examples.$ex"
done
echo "artifact: OK in $SECONDS s (resolving and compiling $resolved_in s)"
