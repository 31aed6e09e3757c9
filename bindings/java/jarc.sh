#!/bin/sh
# SPDX-License-Identifier: MIT
# jarc.sh JAVAC JAR OUT.jar CLASSPATH SOURCE...: compiles the sources (Java 17)
# against CLASSPATH (':'-separated, may be empty) into OUT.jar.
set -eu
javac=$1 jar=$2 out=$3 cp=$4
shift 4
dir=$(mktemp -d "${out}.classes.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$javac" --release 17 -Xlint:all -Werror -encoding UTF-8 -d "$dir" ${cp:+-cp "$cp"} "$@"
rm -f "$out"
"$jar" --create --file "$out" -C "$dir" .
