#!/usr/bin/env bash
# clang-format over every C and C++ file of the project (.clang-format at the
# root): rewrites them in place, or with --check changes nothing and fails,
# naming each file and line, if any file is not formatted.
#   scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format is not installed" >&2; exit 2; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
else # a tarball: every source file outside the build directories
    mapfile -t files < <(find . -path './build*' -prune -o -path ./logs -prune -o \
        -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) -print | sed 's|^\./||' | sort)
fi
if [ "${1:-}" = --check ]; then
    clang-format --dry-run --Werror "${files[@]}"
    echo "format: ${#files[@]} files formatted as .clang-format says"
else
    clang-format -i "${files[@]}"
fi
